"""Recover an uncertain acquisition: generate and keep the identifiers before acquiring."""

import os

from volcano_sdk import VolcanoClient

client = VolcanoClient(
    anon_key=os.environ["VOLCANO_ANON_KEY"],
    service_key=os.environ["VOLCANO_SERVICE_KEY"],
    api_url=os.environ.get("VOLCANO_API_URL", "https://api.volcano.dev"),
)

# --- seed snippet ---
from uuid import uuid4

owner_token = str(uuid4())
request_id = str(uuid4())
lease = client.locks.acquire(
    "daily-report", ttl=30, token=owner_token, request_id=request_id
)
# --- end of seed snippet ---

# Repeating the same attempt (as after a failed response) recovers the same lease.
again = client.locks.acquire("daily-report", ttl=30, token=owner_token, request_id=request_id)
print("Recovered the same lease:", again == lease, "fence", again.fencing_token)
