"""A fenced read-modify-write into a PostgreSQL table: a stale holder's write is refused.

    VOLCANO_* as for the other examples; FENCED_POSTGRES_URL names the protected database
    (needs psycopg: pip install "psycopg[binary]").
"""

import os

import psycopg

from volcano_sdk import Fence, StaleFenceError, VolcanoClient

client = VolcanoClient(
    anon_key=os.environ["VOLCANO_ANON_KEY"],
    service_key=os.environ["VOLCANO_SERVICE_KEY"],
    api_url=os.environ.get("VOLCANO_API_URL", "https://api.volcano.dev"),
)
store = psycopg.connect(os.environ["FENCED_POSTGRES_URL"])
with store.transaction():
    Fence(1, resource="daily-report").create_table(store.cursor())
    store.execute("CREATE TABLE IF NOT EXISTS reports (name TEXT PRIMARY KEY, runs INTEGER)")
    store.execute("INSERT INTO reports VALUES ('daily-report', 0) ON CONFLICT DO NOTHING")

# An earlier holder whose lease was taken over; it still believes it holds the lock.
stale = client.locks.acquire("daily-report", ttl=30)
client.locks.force_release("daily-report")

with client.locks.with_lock("daily-report", ttl=30) as guard:
    fence = Fence(guard.lease.fencing_token, resource="daily-report")
    with store.transaction():  # claim before reading: raises the stored fence to ours
        fence.claim(store.cursor())
        row = store.execute("SELECT runs FROM reports WHERE name = 'daily-report'").fetchone()
        runs = row[0]
    if guard.lost:
        raise RuntimeError("Lock ownership was lost")
    with store.transaction():  # verify in the write's own transaction; it locks the fence row
        fence.verify(store.cursor())
        store.execute("UPDATE reports SET runs = %s WHERE name = 'daily-report'", (runs + 1,))
    print("Fenced write accepted with fence", fence.token, "runs =", runs + 1)

try:
    with store.transaction():
        Fence(stale.fencing_token, resource="daily-report").verify(store.cursor())
        store.execute("UPDATE reports SET runs = -1 WHERE name = 'daily-report'")
except StaleFenceError:
    print("Stale write refused for fence", stale.fencing_token)
store.close()
client.close()
