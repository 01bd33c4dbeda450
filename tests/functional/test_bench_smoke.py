"""Each benchmark with a smoke size runs end to end at it and produces its figures, so that a
benchmark cannot break unnoticed (issue #37: `python -m bench proof` counted relayed Proof frames,
which peer protocol 3 no longer pushes, and reported "handled 0 of 14,000" for weeks). The
command line is the one an engineer types (`python -m bench --smoke --json FILE NAME`); the
figures' targets are not checked: a smoke size is too small to mean anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.daemons import BENCH_OCTETS
from tests.functional.framework import TEST_OCTETS, narrator, scaled

log = narrator(__name__)
REPO = Path(__file__).resolve().parents[2]


def smoke(tmp_path: Path, name: str, timeout: float, env: dict[str, str] | None = None) -> dict:
    out = tmp_path / f"{name}.json"
    log.info("python -m bench --smoke --json %s %s", out.name, name)
    run = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--json", str(out), name], cwd=REPO,
                         capture_output=True, text=True, timeout=scaled(timeout),
                         env={**os.environ, **env} if env else None)
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(out.read_text())
    assert document["smoke"] is True and document["commit"] and document["machine"]["cpus"]
    return document["benchmarks"][name]


def test_proof_bench_counts_every_proof_a_protocol_3_peer_has_answered(tmp_path: Path):
    figures = smoke(tmp_path, "proof", 120)
    (trial,) = figures["trials"]
    assert trial["acks_received"] == trial["proofs"] == figures["service_nodes"] * figures["rounds"]
    assert figures["intake_per_s"] > 0 and figures["ratio"] > 0 and trial["announced_s"] > 0
    before, after = trial["verify_before_after"]
    assert before > 0 and after > 0 and trial["verify_per_s"] == (before + after) / 2, "the limit brackets the trial"


def test_sync_bench_syncs_its_chain_and_replays_it(tmp_path: Path):
    figures = smoke(tmp_path, "sync", 120)
    assert len(figures["runs"]) == 1 and figures["chain"]["blocks"] == 2_100
    assert figures["replay"] and figures["verify_per_s"] > 0
    assumed = figures["replay"]["assume_valid"]
    assert assumed["blocks_per_s"] > 0 and assumed["signatures"] < figures["replay"]["signatures"]


def test_snapshot_bench_starts_a_node_from_its_snapshot_and_one_from_genesis(tmp_path: Path):
    figures = smoke(tmp_path, "snapshot", 120, env={"SNODE_BENCH_CACHE": str(tmp_path / "cache")})
    assert figures["built_now"] and figures["chain"]["utxos"] > 20_000 and figures["chain"]["service_nodes"] == 40
    assert figures["snapshot"]["chunks"] > 1 and "loaded the snapshot of height" in figures["from_snapshot"]["loaded"]
    for start in (figures["from_snapshot"], figures["from_genesis"]):
        assert start["tip_s"] > 0 and start["proof_s"] > 0 and start["peak_rss_mb"] > 0
    assert figures["from_genesis"]["loaded"] == "", "the replay loads no snapshot"
    assert figures["from_snapshot"]["verified_s"] > figures["from_snapshot"]["tip_s"]
    assert "history check: done in" in figures["from_snapshot"]["checked"]
    assert figures["root"]["root_ms"] > 0 and figures["root"]["keys"] > 0


def test_core_bench_applies_its_blocks(tmp_path: Path):
    figures = smoke(tmp_path, "core", 60)
    assert figures["service_nodes"] == 20 and set(figures["blocks"]) == {"1", "5"}
    assert all(block["sig_share"] > 0 and block["root_ms"] > 0 for block in figures["blocks"].values())
    assert figures["full_sum"]["entries"] > 20


def test_store_bench_commits_and_restarts(tmp_path: Path):
    figures = smoke(tmp_path, "store", 60)
    assert figures["blocks"] == 20 and figures["store_commits_per_s"] > 0 and figures["bare_commits_per_s"] > 0
    assert figures["restart"]["utxos"] > 5_000 and figures["restart"]["open_and_load_s"] > 0


def test_intake_bench_accepts_its_proofs_in_process(tmp_path: Path):
    (trial,) = smoke(tmp_path, "intake", 90)["trials"]
    assert all(isinstance(value, (int, float)) and value > 0 for value in trial.values()), trial


def test_hostile_bench_syncs_while_attacked(tmp_path: Path):
    figures = smoke(tmp_path, "hostile", 90)
    assert figures["blocks"] == 300 and figures["quiet_blocks_per_s"] > 0
    assert figures["attacked"]["blocks_per_s"] > 0 and figures["attacked"]["attack"]


@pytest.mark.scenario
def test_hostile_service_phase_runs_every_attack_and_the_mempool_rounds(tmp_path: Path):
    out = tmp_path / "service.json"
    log.info("python -m bench.hostile_service --seconds 5 --json %s: a 5-node devnet, quiet then attacked", out.name)
    run = subprocess.run([sys.executable, "-m", "bench.hostile_service", "--seconds", "5", "--json", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=scaled(300))
    assert run.returncode == 0, run.stderr[-3000:]
    service = json.loads(out.read_text())
    assert service["nodes"] == 5 and service["quiet"]["samples"] > 0 and service["attacked"]["samples"] > 0
    assert all(service["attacks"][k] > 0 for k in ("quorumnet_idle_opened", "lying_hellos", "insider_junk_sent"))
    mempool = service["mempool"]
    log.info("The mempool rounds: %s", mempool)
    assert mempool["mempool_flood_sent"] >= mempool["pool_entries_bound"] and mempool["mempool_rounds"] >= 1
    assert mempool["pool_entries_max"] == mempool["pool_entries_bound"] and service["not_run"] == []


def test_mainnet_bench_feeds_a_daemon_announced_proofs_and_blocks(tmp_path: Path):
    (run,) = smoke(tmp_path, "mainnet", 90)["runs"]
    assert run["service_nodes"] == 40 and run["compression"] == 20
    assert run["fed"]["proofs"] > 0 and run["fed"]["blocks"] >= 1 and run["asked"] > 0
    assert run["real"]["cpu"] > 0 and run["real"]["in"] > 0 and run["real"]["out"] > 0


def test_benchmarks_and_tests_use_disjoint_addresses():
    assert set(BENCH_OCTETS).isdisjoint(TEST_OCTETS) and max(BENCH_OCTETS) <= 255, (BENCH_OCTETS, TEST_OCTETS)


def test_list_names_every_benchmark_once():
    run = subprocess.run([sys.executable, "-m", "bench", "--list"], cwd=REPO, capture_output=True, text=True,
                         timeout=scaled(30))
    assert run.returncode == 0, run.stderr
    names = [line.split()[0] for line in run.stdout.splitlines()]
    assert len(names) == len(set(names)) and {"proof", "final_block", "gossip", "gossip_relay",
                                               "reader_compare"} <= set(names)
