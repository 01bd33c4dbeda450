"""`common.procs`: the /proc readings tests, benchmarks and tools share, on this test's own
process and on one that has gone."""

from __future__ import annotations

import os
import subprocess
import sys

from snode.common import procs


def test_readings_of_a_live_process():
    me = os.getpid()
    fields = procs.stat_fields(me)
    assert fields is not None and fields[0] in "RS" and int(fields[1]) == os.getppid()
    assert (procs.cpu_seconds(me) or 0) > 0
    rss, peak = procs.memory_mib(me), procs.memory_mib(me, "VmHWM")
    assert rss is not None and peak is not None and 0 < rss <= peak
    assert procs.memory_mib(me, "NoSuchField") is None
    args = procs.process_args(me)
    assert args is not None and any(sys.argv[0].encode() in a or b"pytest" in a for a in args)
    assert (procs.open_descriptors(me) or 0) >= 3
    assert me in procs.all_pids()


def test_a_child_and_then_its_absence():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert child.pid in procs.child_pids(os.getpid())
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    gone = child.pid
    assert gone not in procs.child_pids(os.getpid())
    assert procs.stat_fields(gone) is None and procs.cpu_seconds(gone) is None
    assert procs.memory_mib(gone) is None and procs.process_args(gone) is None
    assert procs.open_descriptors(gone) is None
