"""Renew for the duration of a block."""

import os

from volcano_sdk import VolcanoClient

client = VolcanoClient(
    anon_key=os.environ["VOLCANO_ANON_KEY"],
    service_key=os.environ["VOLCANO_SERVICE_KEY"],
    api_url=os.environ.get("VOLCANO_API_URL", "https://api.volcano.dev"),
)

# --- seed snippet ---
with client.locks.with_lock("daily-report", ttl=30) as guard:
    print("Current fence", guard.lease.fencing_token)
    if guard.lost:
        raise RuntimeError("Lock ownership was lost")
