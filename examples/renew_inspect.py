"""Renew or inspect a lease."""

import os

from volcano_sdk import VolcanoClient

client = VolcanoClient(
    anon_key=os.environ["VOLCANO_ANON_KEY"],
    service_key=os.environ["VOLCANO_SERVICE_KEY"],
    api_url=os.environ.get("VOLCANO_API_URL", "https://api.volcano.dev"),
)

# --- seed snippet ---
state = client.locks.get("daily-report")
print(state.held, state.expires_at, state.fencing_token)

lease = client.locks.acquire("daily-report", ttl=30)
try:
    lease = client.locks.renew("daily-report", lease, ttl=60)
finally:
    client.locks.release("daily-report", lease)
