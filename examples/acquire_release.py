"""Distributed locks: acquire a project-scoped lease from trusted server code."""

# --- seed snippet ---
import os

from volcano_sdk import VolcanoClient

client = VolcanoClient(
    anon_key=os.environ["VOLCANO_ANON_KEY"],
    service_key=os.environ["VOLCANO_SERVICE_KEY"],
    api_url=os.environ.get("VOLCANO_API_URL", "https://api.volcano.dev"),
)
lease = client.locks.acquire("daily-report", ttl=30)
try:
    print("Lease acquired", lease.fencing_token)
finally:
    client.locks.release("daily-report", lease)
