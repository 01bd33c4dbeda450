"""A rich progress bar for sync, shown only on an interactive terminal (not --non-interactive)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class SyncProgressBar:
    """Created idle; appears when a sync starts and goes away when it ends."""

    def __init__(self) -> None:
        self._progress: Progress | None = None
        self._task: Any = None

    def update(self, height: int, target: int) -> None:
        if target <= height:
            self.finish()
            return
        if self._progress is None:
            self._progress = Progress(
                TextColumn("sync"), BarColumn(), MofNCompleteColumn(), TextColumn("blocks"),
                TimeRemainingColumn(), console=Console(stderr=True), transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("sync", total=target, completed=height)
        self._progress.update(self._task, completed=height, total=target)

    def finish(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
