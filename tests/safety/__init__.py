"""Mutual exclusion and fencing under faults: workload, fault harness, history, checker.

See docs/safety.md. ``test_checker`` tests the checker on hand-made histories (fast);
``test_short_run`` and ``test_sabotage`` run the real system (marked ``slow``).
"""
