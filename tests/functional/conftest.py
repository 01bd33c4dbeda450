"""Functional tests: real snoded processes on loopback.

The `nodes` fixture (framework.py) starts and stops daemons; `sn` is the one daemon many tests
want, a regtest service node. Each test's outcome is kept on its item so that `nodes` can tell a
failure (keep data dirs, print log tails) from a pass.
"""

from __future__ import annotations

from collections.abc import Generator

import pluggy
import pytest

from tests.functional.framework import NodeSet, TestNode, nodes  # noqa: F401  (fixture)


@pytest.fixture
def sn(nodes: NodeSet) -> TestNode:  # noqa: F811  (the parameter is the fixture imported above)
    """A regtest daemon started with --service-node."""
    return nodes.add(extra_args=["--service-node"])


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None],
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
