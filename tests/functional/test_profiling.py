"""SNODE_PROFILE: a developer's CPU profile of a running snoded (app/profiling.py), written at a
clean stop, covering the event loop and the store thread; not an operator's option."""

from __future__ import annotations

import pstats

from tests.functional.framework import assert_equal, narrator, run_snoded

log = narrator(__name__)


def test_a_clean_stop_writes_every_threads_profile(nodes, tmp_path):
    log.info("Start a regtest node with SNODE_PROFILE, mine 3 blocks, stop it cleanly")
    out = tmp_path / "snoded.prof"
    node = nodes.add(start=False)
    node.start(env={"SNODE_PROFILE": str(out)})
    node.generate_blocks(blocks=3)
    assert not out.exists()  # written at the stop, not before
    assert_equal(node.stop(), 0)
    log.info("The profile holds the event loop's RPC handler and the store thread's commits")
    # Stats.stats, the raw table keyed by (file, line, function), is missing from typeshed's stubs.
    table = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    functions = {(path.replace("\\", "/"), name) for path, _, name in table}
    assert any(path.endswith("snode/api/server.py") and name == "post" for path, name in functions)
    assert any(path.endswith("snode/store/chain_store.py") and name == "commit" for path, name in functions)


def test_the_profile_is_no_operator_option():
    log.info("--help does not mention it")
    assert "PROFILE" not in run_snoded(["--help"]).stdout.upper()
