"""Where one service-node daemon's CPU really goes per block (`python -m bench --perf blocks`).

cProfile (blocks_profile, `--profile`) charges each Python call its own overhead, so code made
of many small calls looks several times dearer than it is, and it sees neither the kernel nor
ZeroMQ's I/O thread (docs/PERFORMANCE.md, Third round, 2i). Here Linux `perf` samples node3 (a
validator the benchmark does not poll) from outside on the CPU clock, with DWARF call stacks;
Python 3.13's perf_jit (PYTHON_PERF_JIT_SUPPORT=1 in node3's environment only) writes a jitdump
that `perf inject --jit` turns into one `py::qualname:file` symbol per Python frame. The samples
are then split by thread, by library, by syscall in the kernel and, inclusive, by the same entry
points as cProfile's parts (blocks_profile.PARTS), in ms of CPU per block.

The parsing and the split are pure (tested on a captured `perf script` text); `Recording` runs
the perf commands, each bounded, and removes what perf and Python leave in /tmp for node3.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rich.console import Console

from bench.blocks_profile import PARTS
from bench.daemons import stop_process
from snode.common.procs import cpu_seconds

JIT_ENV: Final = "PYTHON_PERF_JIT_SUPPORT"
SECONDS: Final = 60.0
FREQUENCY: Final = 999
PARANOID: Final = Path("/proc/sys/kernel/perf_event_paranoid")
JIT_DIR: Final = Path("/tmp")  # where Python 3.13 writes jit-PID.dump (fixed) and perf inject the jitted .so
KERNEL: Final = "[kernel.kallsyms]"
SCRIPT_FIELDS: Final = "comm,tid,period,ip,sym,dso"
COMMAND_TIMEOUT: Final = 600.0
FRAME: Final = re.compile(r"^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")
SYSCALL: Final = re.compile(r"^(?:__x64_sys_|__ia32_sys_|__arm64_sys_|__se_sys_|__do_sys_|__sys_|ksys_)(\w+)$")
ROWS: Final = 12


# --- whether perf can run here ------------------------------------------------------------------

def refusal(perf: str | None, version: tuple[int, int], paranoid: int | None, root: bool) -> str | None:
    """The one line why `--perf` cannot run with these facts, or None when it can."""
    if perf is None:
        return "--perf needs Linux perf, and `perf` is not on PATH (Debian: apt-get install linux-perf)"
    if version < (3, 13):
        return (f"--perf needs Python 3.13 or newer, and this is {version[0]}.{version[1]}: run it with "
                "Python 3.13 or newer: its -X perf_jit gives perf the Python frames")
    if paranoid is None:
        return f"--perf needs perf events, and this kernel has no {PARANOID}"
    if paranoid > 2 and not root:
        return (f"perf cannot record our own processes here: {PARANOID} is {paranoid}; run as root or "
                "set it to 2 or less (sysctl kernel.perf_event_paranoid=2)")
    return None


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def preflight() -> str | None:
    """`refusal` for this machine and this Python."""
    try:
        paranoid: int | None = int(PARANOID.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        paranoid = None
    return refusal(shutil.which("perf"), sys.version_info[:2], paranoid, os.geteuid() == 0)


# --- the samples --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """One sample of `perf script -F comm,tid,period,ip,sym,dso`: its thread, its weight (ns of
    CPU, the cpu-clock event's period) and its call stack as (symbol, library), innermost first."""

    comm: str
    tid: int
    period: int
    frames: tuple[tuple[str, str], ...]


def parse(lines: Iterable[str]) -> list[Sample]:
    """The samples of `perf script` text: a header line (comm, tid, period), then one indented
    line per frame, then a blank line."""
    samples: list[Sample] = []
    head: tuple[str, int, int] | None = None
    frames: list[tuple[str, str]] = []
    for line in [*lines, ""]:
        if not line.strip():
            if head is not None:
                samples.append(Sample(*head, tuple(frames)))
            head, frames = None, []
        elif not line[0].isspace():
            comm, tid, period = line.rstrip().rsplit(None, 2)  # a thread's name may hold spaces
            head, frames = (comm, int(tid), int(period)), []
        elif head is not None and (match := FRAME.match(line)):
            frames.append((match[1], match[2]))
    return samples


def python_frame(symbol: str) -> tuple[str, str] | None:
    """(file, function name) of a perf_jit symbol `py::Class.method:/path/file.py`, else None."""
    if not symbol.startswith("py::"):
        return None
    qualname, _, path = symbol[4:].partition(":")
    return path, qualname.rpartition(".")[2]


def thread_of(sample: Sample, pid: int) -> str:
    """The thread's role: the main thread runs the event loop; the store's executor thread runs
    concurrent.futures' `_worker` (Python 3.13 does not name threads for the OS: both are
    "python" to perf); ZeroMQ names its own."""
    if sample.tid == pid:
        return "main (event loop)"
    for symbol, _ in sample.frames:
        frame = python_frame(symbol)
        if frame is not None and frame[0].endswith("concurrent/futures/thread.py") and frame[1] == "_worker":
            return "store (executor thread)"
    return sample.comm


def library_of(sample: Sample) -> str:
    """The library of the sampled (innermost) function, by file name."""
    if not sample.frames:
        return "<no stack>"
    dso = sample.frames[0][1]
    if dso == KERNEL:
        return "kernel"
    name = dso.rpartition("/")[2]
    return "Python frames (perf_jit trampolines)" if name.startswith("jitted-") else name


def syscall_of(sample: Sample) -> str | None:
    """For a sample in the kernel, its system call (the innermost `sys_` frame) or what else
    brought it there; None for a sample in user space."""
    if not sample.frames or sample.frames[0][1] != KERNEL:
        return None
    kernel = [symbol for symbol, dso in sample.frames if dso == KERNEL]
    for symbol in kernel:
        if match := SYSCALL.match(symbol):
            return match[1]
    return f"<no system call frame: {kernel[-1]}>"


def in_part(sample: Sample, entries: tuple[tuple[str, str], ...]) -> bool:
    """Whether any frame of the sample is one of a part's entry points (file suffix, name)."""
    frames = {frame for symbol, _ in sample.frames if (frame := python_frame(symbol)) is not None}
    return any(path.endswith(suffix) and name == entry for path, name in frames for suffix, entry in entries)


@dataclass(frozen=True)
class Split:
    """CPU ms per block: the total, then (name, ms) rows, largest first except `parts`, which
    keep blocks_profile.PARTS' order."""

    samples: int
    seconds: float
    interval_s: float
    total: float
    threads: list[tuple[str, float]]
    libraries: list[tuple[str, float]]
    syscalls: list[tuple[str, float]]
    parts: list[tuple[str, float]]
    proc_total: float | None = None


def split(samples: list[Sample], pid: int, seconds: float, interval_s: float,
          proc_cpu_s: float | None = None) -> Split:
    """The samples of `seconds` of process `pid`, a block every `interval_s`, split per block;
    `proc_cpu_s`: the process's CPU seconds over the same window by /proc, as a cross-check."""
    per_block = interval_s / seconds / 1e6  # ns of CPU in the window -> ms a block

    def rows(key: Callable[[Sample], str | None]) -> list[tuple[str, float]]:
        counts: Counter[str] = Counter()
        for sample in samples:
            name = key(sample)
            if name is not None:
                counts[name] += sample.period
        return [(name, ns * per_block) for name, ns in counts.most_common()]

    parts = [(part, sum(s.period for s in samples if in_part(s, entries)) * per_block) for part, entries in PARTS]
    return Split(
        samples=len(samples), seconds=seconds, interval_s=interval_s,
        total=sum(s.period for s in samples) * per_block,
        threads=rows(lambda s: thread_of(s, pid)), libraries=rows(library_of), syscalls=rows(syscall_of),
        parts=parts, proc_total=None if proc_cpu_s is None else 1000 * proc_cpu_s * interval_s / seconds,
    )


def report(result: Split, console: Console) -> None:
    blocks = result.seconds / result.interval_s
    console.print(f"node3's CPU per block by perf (cpu-clock at {FREQUENCY} Hz, DWARF stacks, Python "
                  f"perf_jit; {result.seconds:g} s, a block every {result.interval_s:.2f} s = {blocks:.0f} blocks):")
    proc = f" (by /proc over the same window: {result.proc_total:.2f} ms)" if result.proc_total is not None else ""
    sections = (("by thread", result.threads[:ROWS]),
                ("by library (of the sampled function)", result.libraries[:ROWS]),
                ("kernel, by system call", result.syscalls[:ROWS]),
                ("inclusive by entry point (as --profile's parts; they overlap)", result.parts))
    width = max([48, *(len(name) for _, rows in sections for name, _ in rows)])
    console.print(f"  {'total, ' + str(result.samples) + ' samples':<{width + 2}} {result.total:7.2f} ms{proc}")
    for title, rows in sections:
        console.print(f"  {title}:")
        if not rows:
            console.print("    (no samples)")
        for name, ms in rows:
            share = 100 * ms / result.total if result.total else 0.0
            console.print(f"    {name:<{width}} {ms:7.2f} ms {share:5.1f} %")


# --- the recording ------------------------------------------------------------------------------

class Recording:
    """`perf record` of one process for `seconds`; its files go under `directory` (perf's
    build-id cache too, instead of ~/.debug)."""

    def __init__(self, directory: Path, seconds: float) -> None:
        self.seconds = seconds
        self.data = directory / "node3.perf"
        self.jit_data = directory / "node3.jit.perf"
        self.script = directory / "node3.perf-script.txt"
        self.buildids = directory / "perf-buildids"
        self.log = directory / "perf.log"
        self.pid = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.cpu_start: float | None = None
        self.cpu_end: float | None = None

    def start(self, pid: int) -> None:
        """Start recording process `pid` now."""
        self.pid = pid
        self.cpu_start = cpu_seconds(pid)
        with open(self.log, "ab") as log:
            # -k 1: the samples on CLOCK_MONOTONIC, the jitdump's clock, which perf inject --jit needs
            self.proc = subprocess.Popen(
                [*self._perf(), "record", "-e", "cpu-clock", "-F", str(FREQUENCY), "-g", "--call-graph",
                 "dwarf,16384", "-k", "1", "-p", str(pid), "-o", str(self.data), "--", "sleep", f"{self.seconds:g}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def _perf(self) -> list[str]:
        return ["perf", "--buildid-dir", str(self.buildids)]

    def _failed(self, what: str) -> RuntimeError:
        tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
        return RuntimeError(f"{what} failed; {self.log}:\n{tail}")

    def poll(self) -> None:
        """Read the process's CPU time as soon as perf has ended: call it often while it runs,
        so that /proc's figure covers the recorded window only."""
        if self.proc is not None and self.cpu_end is None and self.proc.poll() is not None:
            self.cpu_end = cpu_seconds(self.pid)

    def wait(self) -> None:
        """Until perf record has written its file (bounded: its seconds and a minute)."""
        assert self.proc is not None, "wait() before start()"
        try:
            code = self.proc.wait(self.seconds + 60)
        except subprocess.TimeoutExpired:
            raise self._failed(f"perf record (pid {self.proc.pid}) did not end in {self.seconds + 60:g} s") from None
        self.poll()
        if code != 0:
            raise self._failed(f"perf record (exit code {code})")

    def stop(self) -> None:
        """Stop perf record by its pid if it still runs (SIGINT lets it write; SIGKILL after 10 s)."""
        if self.proc is not None:
            stop_process(self.proc, 10, signal.SIGINT)

    def split(self, interval_s: float) -> Split:
        """Inject the Python frames and split the samples: run once node3 has stopped, so its
        jitdump is complete."""
        self._run("perf inject", ["inject", "--jit", "-i", str(self.data), "-o", str(self.jit_data)])
        self._run("perf script", ["script", "-F", SCRIPT_FIELDS, "--no-inline", "-i", str(self.jit_data)],
                  self.script)
        with open(self.script, errors="replace") as text:
            samples = parse(text)
        cpu = None if self.cpu_start is None or self.cpu_end is None else self.cpu_end - self.cpu_start
        return split(samples, self.pid, self.seconds, interval_s, cpu)

    def _run(self, what: str, args: list[str], stdout: Path | None = None) -> None:
        with open(stdout or self.log, "ab" if stdout is None else "wb") as out, open(self.log, "ab") as log:
            try:
                code = subprocess.run([*self._perf(), *args], stdin=subprocess.DEVNULL, stdout=out, stderr=log,
                                      timeout=COMMAND_TIMEOUT, check=False).returncode
            except subprocess.TimeoutExpired:
                raise self._failed(f"{what} (over {COMMAND_TIMEOUT:g} s)") from None
        if code != 0:
            raise self._failed(f"{what} (exit code {code})")

    def clean(self, keep: bool) -> None:
        """Remove what Python and perf left in /tmp for node3's pid (its perf map, its jitdump, the
        jitted .so files perf inject wrote), and the perf data too unless `keep`."""
        if not self.pid:
            return
        left = [JIT_DIR / f"perf-{self.pid}.map", JIT_DIR / f"jit-{self.pid}.dump",
                *JIT_DIR.glob(f"jitted-{self.pid}-*.so")]
        if not keep:
            left += [self.data, self.jit_data, self.script]
            shutil.rmtree(self.buildids, ignore_errors=True)
        for path in left:
            path.unlink(missing_ok=True)
