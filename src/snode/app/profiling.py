"""A developer's CPU profile of a running daemon: with SNODE_PROFILE=FILE in its environment,
`snoded` runs cProfile on every thread (the event loop and the store thread) and writes the
merged statistics to FILE (pstats format) when it stops cleanly. Not an operator's option, so
not in --help (docs/PERFORMANCE.md, "Third round", shows its use).

The clock is each thread's CPU time (`time.thread_time`), not the wall clock: on a loaded
machine a thread waits for a core far longer than it runs, and that wait says nothing about
the code it waits in.
"""

from __future__ import annotations

import atexit
import cProfile
import os
import pstats
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

ENV = "SNODE_PROFILE"


class ThreadProfiles:
    """One cProfile per thread (a profiler is not shared between threads), merged at exit."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def start_here(self) -> None:
        """Profile the calling thread from now on."""
        profile = cProfile.Profile(time.thread_time)
        with self._lock:
            self.profiles.append(profile)
        profile.enable()

    def _thread_started(self, frame: FrameType, event: str, arg: Any) -> None:
        # threading calls this as the new thread's profile function before its target runs;
        # enabling cProfile replaces it on that thread.
        self.start_here()

    def dump(self) -> None:
        """Write the merged statistics (a thread still running is read as it stands)."""
        with self._lock:
            profiles = list(self.profiles)
        for profile in profiles:
            profile.disable()  # stops the calling thread's; the others' are only read
        try:
            stats = pstats.Stats(*profiles)
            stats.dump_stats(str(self.out))
        except (OSError, TypeError) as err:
            print(f"snoded: cannot write the profile to {self.out}: {err}", file=sys.stderr)


def start_from_env() -> ThreadProfiles | None:
    """Start profiling this thread and every thread started later when SNODE_PROFILE names a
    file; the statistics are written there at exit."""
    out = os.environ.get(ENV)
    if not out:
        return None
    profiles = ThreadProfiles(Path(out))
    threading.setprofile(profiles._thread_started)
    profiles.start_here()
    atexit.register(profiles.dump)
    return profiles
