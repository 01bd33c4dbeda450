"""`python -m bench --perf blocks`'s split of perf samples (bench/perf_split.py): the parsing of
`perf script` text, the split per block by thread, library, system call and cProfile's entry
points, the refusals before anything starts, and what is removed afterwards.

CAPTURED (tests/fixtures/perf-script-node3.txt) is six samples of real recordings of node3 (`perf
script -F comm,tid,period,ip,sym,dso --no-inline` after `perf inject --jit`, Python 3.13 with
perf_jit; pid 9074), their stacks cut to the frames that matter here and their paths shortened.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from bench.perf_split import PARTS, Recording, Sample, in_part, parse, python_frame, refusal, report, split

PID = 9074
CAPTURED = (Path(__file__).parents[1] / "fixtures" / "perf-script-node3.txt").read_text()
# 60 s of samples, a block every 2 s: 30 blocks, so ns of CPU -> ms a block is x 2 / 60 / 1e6.
SECONDS, INTERVAL = 60.0, 2.0
SMALL, LARGE = 500250 / 30e6, 2004008 / 30e6


def test_parse_reads_every_sample_with_its_thread_weight_and_stack() -> None:
    samples = parse(CAPTURED.splitlines())
    assert [(s.comm, s.tid, s.period, len(s.frames)) for s in samples] == [
        ("python", 9074, 500250, 12), ("python", 9106, 500250, 9), ("ZMQbg/IO/0", 9095, 500250, 8),
        ("ZMQbg/IO/0", 9095, 500250, 3), ("ZMQbg/IO/0", 9095, 2004008, 5), ("ZMQbg/IO/0", 9095, 2004008, 2),
    ]
    assert samples[0].frames[0] == (
        "fe25519_sq2", "/work/snode/.venv313/lib/python3.13/site-packages/nacl/_sodium.abi3.so")
    assert samples[1].frames[4] == (
        "py::ChainWriter.accept_block.<locals>.<lambda>:/work/snode/src/snode/node/writer.py",
        "/tmp/jitted-9074-4015.so")


def test_parse_takes_a_thread_name_with_spaces_and_text_without_a_final_blank_line() -> None:
    text = "Thread Pool 2  77  1000\n\t  1f00 work (/usr/lib/libx.so)\n"
    assert parse(text.splitlines()) == [Sample("Thread Pool 2", 77, 1000, (("work", "/usr/lib/libx.so"),))]
    assert parse([]) == []


def test_split_per_block_by_thread_library_and_system_call() -> None:
    result = split(parse(CAPTURED.splitlines()), PID, SECONDS, INTERVAL, proc_cpu_s=0.003)
    assert result.samples == 6
    assert result.total == pytest.approx(4 * SMALL + 2 * LARGE)
    assert result.proc_total == pytest.approx(0.1)  # 3 ms in 30 blocks
    assert dict(result.threads) == pytest.approx({
        "ZMQbg/IO/0": 2 * SMALL + 2 * LARGE, "main (event loop)": SMALL, "store (executor thread)": SMALL})
    assert result.threads[0][0] == "ZMQbg/IO/0"  # largest first
    assert dict(result.libraries) == pytest.approx({
        "kernel": 2 * SMALL + LARGE, "_sodium.abi3.so": SMALL, "libsqlite3.so.0.8.6": SMALL,
        "libsodium-6c8f8377.so.26.4.0": LARGE})
    assert dict(result.syscalls) == pytest.approx({
        "sendto": SMALL, "<no system call frame: entry_SYSCALL_64_after_hwframe>": SMALL,
        "<no system call frame: asm_sysvec_apic_timer_interrupt>": LARGE})


def test_split_inclusive_by_cprofiles_entry_points() -> None:
    parts = dict(split(parse(CAPTURED.splitlines()), PID, SECONDS, INTERVAL).parts)
    assert list(parts) == [part for part, _ in PARTS]
    assert parts["signatures verified (libsodium)"] == pytest.approx(SMALL)
    assert parts["uptime proofs: intake (checks, accept)"] == pytest.approx(SMALL)
    assert parts["block apply, store write and commit (store thread)"] == pytest.approx(SMALL)
    assert parts["  of which store write and commit"] == pytest.approx(SMALL)  # Node.store_batch
    assert parts["template check"] == 0
    assert parts["logging"] == 0


def test_a_python_frame_matches_by_file_suffix_and_last_name() -> None:
    sample = Sample("python", PID, 1, (("py::Relay._on_new_block:/x/src/snode/net/relay.py", "/tmp/jitted-1-1.so"),))
    assert in_part(sample, (("snode/net/relay.py", "_on_new_block"),))
    assert not in_part(sample, (("snode/net/peers.py", "_on_new_block"),))
    assert not in_part(sample, (("snode/net/relay.py", "new_block"),))
    assert python_frame("PyObject_Vectorcall") is None


@pytest.mark.parametrize(("facts", "words"), [
    ((None, (3, 13), 2, False), "`perf` is not on PATH"),
    (("/usr/bin/perf", (3, 11), 2, False),
     "this is 3.11: run it with Python 3.13 or newer: its -X perf_jit gives perf the Python frames"),
    (("/usr/bin/perf", (3, 13), 3, False), "perf_event_paranoid is 3"),
    (("/usr/bin/perf", (3, 13), None, True), "no /proc/sys/kernel/perf_event_paranoid"),
])
def test_refusal_is_one_line_naming_what_to_fix(facts: tuple[str | None, tuple[int, int], int | None, bool],
                                                words: str) -> None:
    line = refusal(*facts)
    assert line is not None and words in line and "\n" not in line


def test_no_refusal_where_perf_can_record() -> None:
    assert refusal("/usr/bin/perf", (3, 13), 2, False) is None
    assert refusal("/usr/bin/perf", (3, 14), 4, True) is None  # root records whatever the setting
    assert refusal("/usr/bin/perf", (3, 13), -1, False) is None


def test_clean_removes_only_the_recorded_pids_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jit_dir = tmp_path / "tmp"
    jit_dir.mkdir()
    monkeypatch.setattr("bench.perf_split.JIT_DIR", jit_dir)
    ours = ["perf-9074.map", "jit-9074.dump", "jitted-9074-1.so", "jitted-9074-3873.so"]
    others = ["jit-90741.dump", "jitted-90741-1.so", "jitted-9075-1.so", "perf-9075.map"]
    for name in ours + others:
        (jit_dir / name).write_bytes(b"x")
    for keep in (True, False):
        recording = Recording(tmp_path, 1.0)
        recording.pid = PID  # as start() sets it
        for path in (recording.data, recording.jit_data, recording.script, recording.buildids / "a" / "b"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x")
        recording.clean(keep=keep)
        assert sorted(p.name for p in jit_dir.iterdir()) == sorted(others)
        assert recording.data.exists() is keep and recording.jit_data.exists() is keep
        assert recording.buildids.exists() is keep
    (jit_dir / "jit-9074.dump").write_bytes(b"x")
    Recording(tmp_path, 1.0).clean(keep=False)  # never started: it leaves everything alone
    assert (jit_dir / "jit-9074.dump").exists()


def test_the_cpu_cross_check_is_read_when_perf_ends_not_later() -> None:
    recording = Recording(Path("/nonexistent"), 1.0)
    recording.pid = os.getpid()
    recording.proc = subprocess.Popen([sys.executable, "-c", "pass"])
    recording.poll()  # perf still running (or not yet seen to end): nothing read before it ends
    recording.proc.wait(30)
    recording.poll()
    first = recording.cpu_end
    assert first is not None
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # this process's CPU moves on after perf has ended
        pass
    recording.poll()
    assert recording.cpu_end == first


def test_report_prints_every_section_with_ms_and_share() -> None:
    console = Console(record=True, width=200)
    report(split(parse(CAPTURED.splitlines()), PID, SECONDS, INTERVAL, proc_cpu_s=0.003), console)
    text = console.export_text()
    assert "60 s, a block every 2.00 s = 30 blocks" in text
    assert "total, 6 samples" in text and "(by /proc over the same window: 0.10 ms)" in text
    lines = {line.strip().split("  ")[0]: line for line in text.splitlines()}
    assert lines["sendto"].endswith(f"{SMALL:7.2f} ms {100 * SMALL / (4 * SMALL + 2 * LARGE):5.1f} %")
    assert len({line.index(" ms ") for line in text.splitlines() if line.startswith("    ")}) == 1  # one column
