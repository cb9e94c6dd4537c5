"""The Volcano Locks benchmark (issue 6): ``scripts/bench`` runs ``python -m bench``.

Loopback only, bounded in count and time; every figure of one run is compared as a ratio with
figures from the same run, because this machine's noise (up to 1.8x) swamps run-to-run
comparisons.  Modules: ``_util`` (timed loops, stats, processes), ``servers`` (volcano-locks,
the no-op endpoint, etcd, scratch PostgreSQL), ``cycles`` (SDK and raw HTTP cycles), ``peers``
(Redis, PostgreSQL lease table, etcd), ``guards`` (with_lock scaling, run in a child process),
``wrk`` (server capacity), ``imports``, ``profiles``, ``report`` (table, markdown, plot).
"""
