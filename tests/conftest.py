"""Settings shared by the whole test suite.

Hypothesis runs a modest number of examples by default so that `make test` stays fast on a
2-core machine; set HYPOTHESIS_PROFILE=thorough for a longer hunt. Deadlines are off because a
shared CI core makes single-example timings meaningless.

Wallets made by the suite (by the tests and by every `snode-wallet` process they start, which
inherit the environment) are written at Argon2id's lowest cost: SNODE_TEST_WALLET_KDF=min, which
the wallet refuses outside regtest and devnet. Every wallet process derives its file key once,
and the wallet test modules alone derive about 150 (counted: 149 over the five functional and
five unit wallet modules): 0.6 s each at the real MODERATE cost, about 90 s of a 2-core machine. The
tests of the real cost (test_wallet_keystore, test_wallet) unset the variable.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from snode.common import compiled

os.environ.setdefault("SNODE_TEST_WALLET_KDF", "min")

settings.register_profile("default", max_examples=50, deadline=None)
settings.register_profile("thorough", max_examples=1_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked slow (a minute or more on a 2-core machine) run first, the rest keep
    their order: with `make test`'s `--dist load --maxschedchunk 1` each worker takes the next
    test as it frees, so the long ones overlap from the start and the short ones fill the end,
    instead of one long test starting last while the other worker idles."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_report_header() -> str:
    """Which modules run compiled (`make compiled`), or "none (pure Python)"."""
    return compiled.describe()


def pytest_configure(config: pytest.Config) -> None:
    """A compiled module older than its source would test the old code: refuse, in one line."""
    old = compiled.stale()
    if old:
        pytest.exit(f"{', '.join(old)} changed since `make compiled`: run `make compiled` again, or `make pure`",
                    returncode=4)
