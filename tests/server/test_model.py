"""Random operation sequences on one key, against each real store, checked against a model.

The model is the lock as DESIGN.md states it, kept deliberately naive: who holds it, whether the
lease has expired, the last fence.  Expiry is forced by moving the row's expiry into the past.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server._db import backdate
from volcano_server.storage import Mutation, Store, open_store

TOKENS = ["aaaaaaaa-0000-4000-8000-000000000001", "BBBBBBBB-0000-4000-8000-000000000002"]

op_strategy = st.tuples(
    st.sampled_from(["acquire", "renew", "release", "force_release", "expire", "get"]),
    st.sampled_from([0, 1]),  # which token
    st.booleans(),  # upper-case spelling of the token
)


@dataclass
class Model:
    fence: int = 0
    holder: str | None = None  # lowercase token
    spelling: str | None = None
    expired: bool = False

    def held(self) -> bool:
        return self.holder is not None and not self.expired


@pytest.mark.slow
def test_random_sequences_match_the_model(backend: str, new_database: Callable[[str], str]) -> None:
    url = new_database(backend)
    loop = asyncio.new_event_loop()
    store: Store = open_store(url)
    loop.run_until_complete(store.open())
    loop.run_until_complete(store.create_project("model", "anon-hash", "service-hash"))

    @settings(
        max_examples=80,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(op_strategy, min_size=1, max_size=12))
    def run(ops: list[tuple[str, int, bool]]) -> None:
        key = f"model-{uuid.uuid4().hex}"
        model = Model()
        for op, which, upper in ops:
            token = TOKENS[which].upper() if upper else TOKENS[which].lower()
            if op == "expire":
                backdate(url, key, seconds=3600)
                if model.holder is not None:
                    model.expired = True
                continue
            if op == "get":
                state = loop.run_until_complete(store.get_lock(1, key))
                assert state.held == model.held()
                assert state.fencing_token == (model.fence or None)
                continue
            ttl = None if op in ("release", "force_release") else 30
            m = Mutation(1, op, key, None if op == "force_release" else token, ttl)  # type: ignore[arg-type]
            out = loop.run_until_complete(store.mutate(m))
            if out.status == 200 and "expires_in_ms" in out.body:
                assert 0 <= out.body["expires_in_ms"] <= 30_000
            mine = model.holder == token.lower()
            if op == "acquire":
                if model.held() and not mine:
                    assert (out.status, out.body["error"]["code"]) == (409, "lock_held")
                elif model.held():
                    # The current lease, unchanged, in the spelling this request sent.
                    assert out.status == 200 and out.body["fencing_token"] == model.fence
                    assert out.body["token"] == token
                else:
                    model.fence += 1
                    model.holder, model.spelling, model.expired = token.lower(), token, False
                    assert out.status == 200 and out.body["fencing_token"] == model.fence
                    assert out.body["token"] == token
            elif op == "renew":
                if model.holder is None or not mine:
                    assert (out.status, out.body["error"]["code"]) == (409, "not_holder")
                elif model.expired:
                    assert (out.status, out.body["error"]["code"]) == (409, "lease_expired")
                else:
                    assert out.status == 200 and out.body["fencing_token"] == model.fence
            elif op == "release":
                if model.holder is not None and mine:
                    assert out.body == {"key": key, "released": True}
                    model.holder = model.spelling = None
                elif model.held():
                    assert (out.status, out.body["error"]["code"]) == (409, "not_holder")
                else:
                    assert out.body == {"key": key, "released": False}
            else:  # force_release
                assert out.body == {"key": key, "removed": model.held()}
                model.holder = model.spelling = None
                model.expired = False

    try:
        run()
    finally:
        loop.run_until_complete(store.close())
        loop.close()
