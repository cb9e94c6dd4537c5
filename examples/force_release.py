"""Recover an abandoned lock (administrative recovery; fencing must be enforced downstream)."""

import os

from volcano_sdk import VolcanoClient

client = VolcanoClient(
    anon_key=os.environ["VOLCANO_ANON_KEY"],
    service_key=os.environ["VOLCANO_SERVICE_KEY"],
    api_url=os.environ.get("VOLCANO_API_URL", "https://api.volcano.dev"),
)

# --- seed snippet ---
client.locks.force_release("daily-report")
# --- end of seed snippet ---

print("Held after force release:", client.locks.get("daily-report").held)
