"""A fenced read-modify-write into a SQLite file: a stale holder's write is refused.

    VOLCANO_* as for the other examples; FENCED_SQLITE_PATH names the protected file
    (default: fenced-example.db in the current folder).
"""

import os
import sqlite3

from volcano_sdk import Fence, StaleFenceError, VolcanoClient

client = VolcanoClient(
    anon_key=os.environ["VOLCANO_ANON_KEY"],
    service_key=os.environ["VOLCANO_SERVICE_KEY"],
    api_url=os.environ.get("VOLCANO_API_URL", "https://api.volcano.dev"),
)
store = sqlite3.connect(os.environ.get("FENCED_SQLITE_PATH", "fenced-example.db"))
with store:
    Fence(1, resource="daily-report").create_table(store.cursor())
    store.execute("CREATE TABLE IF NOT EXISTS reports (name TEXT PRIMARY KEY, runs INTEGER)")
    store.execute("INSERT OR IGNORE INTO reports VALUES ('daily-report', 0)")

# An earlier holder whose lease was taken over; it still believes it holds the lock.
stale = client.locks.acquire("daily-report", ttl=30)
client.locks.force_release("daily-report")

with client.locks.with_lock("daily-report", ttl=30) as guard:
    fence = Fence(guard.lease.fencing_token, resource="daily-report")
    with store:  # claim before reading: raises the stored fence to ours
        fence.claim(store.cursor())
        (runs,) = store.execute("SELECT runs FROM reports WHERE name = 'daily-report'").fetchone()
    if guard.lost:
        raise RuntimeError("Lock ownership was lost")
    with store:  # verify in the write's own transaction
        fence.verify(store.cursor())
        store.execute("UPDATE reports SET runs = ? WHERE name = 'daily-report'", (runs + 1,))
    print("Fenced write accepted with fence", fence.token, "runs =", runs + 1)

try:
    with store:
        Fence(stale.fencing_token, resource="daily-report").verify(store.cursor())
        store.execute("UPDATE reports SET runs = -1 WHERE name = 'daily-report'")
except StaleFenceError:
    print("Stale write refused for fence", stale.fencing_token)
client.close()
