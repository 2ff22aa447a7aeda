"""The trace and the timeline of one measured block (``--trace DIR``,
``--timeline FILE``): started with the measuring window, finished with its
report into the report's ``shared`` part (:class:`~stance_magic.report.Shared`)
and its notes.

The writing is :mod:`stance_magic.share`'s (tlparse, the timeline's events);
torch's internals are :mod:`stance_magic.probe.trace`'s.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..paths import shorten_paths
from ..report import Shared
from ..share.trace import run_tlparse
from ..text import fmt_s

if TYPE_CHECKING:
    from ..report import CellReport
    from .closed import Closed

__all__ = ["Sharing"]


@dataclass
class Sharing:
    """The trace and the timeline of one measured block.

    A watch (see probe.watch): the measurement starts it with the block
    (:meth:`start`, before the recorder: a failure here leaves nothing
    open), stops the capture with the block's window (:meth:`stop`) and
    hands it the built report and the closed window (:meth:`finish`).
    """

    name: ClassVar[str] = "sharing"
    optional: ClassVar[bool] = False
    empty: ClassVar[None] = None

    trace_dir: str | None = None
    timeline: str | None = None
    #: run tlparse on the trace when it is installed
    tlparse: bool = True
    capture: Any = None
    wall0: float = 0.0
    perf0: float = 0.0
    #: what the capture saw, once :meth:`stop` ran
    result: Any = None

    @property
    def wants_regions(self) -> bool:
        """The timeline needs the profiler's runs of compiled code."""
        return self.timeline is not None

    def failure_note(self, err: BaseException) -> str:
        return f"not shared: {type(err).__name__}: {err}"

    def uninstall(self) -> None:
        """Nothing stays installed: the capture stops with its block."""

    def stop(self, mark: Any = None, error: BaseException | None = None) -> Any:
        """Stop the capture (once): what it saw, kept for :meth:`finish`."""
        if self.capture is not None:
            self.result, self.capture = self.capture.stop(), None
        return self.result

    def start(self, context: Any = None) -> None:
        from ..probe.trace import TraceCapture, wall_and_perf

        path = None
        if self.trace_dir is not None:
            d = Path(self.trace_dir).expanduser()
            d.mkdir(parents=True, exist_ok=True)
            fd, path = tempfile.mkstemp(
                prefix=time.strftime("stance_magic_cell_%Y%m%d-%H%M%S_"), suffix=".log", dir=d
            )
            os.close(fd)
        self.capture = TraceCapture(path, chromium=self.timeline is not None)
        self.capture.start()
        self.wall0, self.perf0 = wall_and_perf()

    def finish(self, report: CellReport, closed: Closed) -> tuple[Shared, list[str]]:
        """Stop the trace; run tlparse on it; write the timeline of ``report``.
        Returns what was written and the notes to add. A failure here becomes
        a note: the cell's report is never lost to it."""
        result = self.stop()
        if result is None:
            return Shared(), []
        notes: list[str] = []
        try:
            shared = self._finish(report, closed, result, notes)
        except Exception as err:
            notes.append(f"sharing this cell failed: {type(err).__name__}: {err}")
            shared = Shared()
        return shared, notes

    def _finish(self, report: CellReport, closed: Closed, result: Any, notes: list[str]) -> Shared:
        window = closed.window
        if result.detached:
            notes.append(
                "torch's logging was set up again during the cell (torch._logging.set_logs "
                "takes every handler off its trace logger): the trace stops there"
            )
        if result.process_trace:
            notes.append(
                f"TORCH_TRACE is set for this process ({shorten_paths(result.process_trace)}): "
                "left alone, it records this cell too"
            )
        if result.path is not None or self.timeline is not None:
            from ..probe.trace import logging_overhead_s

            overhead = logging_overhead_s(window.records)
            if overhead:
                notes.append(
                    f"torch's structured trace was on: {fmt_s(overhead)} of the compile time "
                    "went to writing it (torch's structured_logging_overhead_s)"
                )
        trace_file = tlparse_index = timeline_file = None
        compile_ids: list[str] = []
        if result.path is not None:
            trace_file, compile_ids = result.path, list(result.compile_ids)
            if self.tlparse:
                run = run_tlparse(result.path)
                if run.index is not None:
                    tlparse_index = str(run.index)
                elif run.error:
                    notes.append(f"tlparse: {run.error}")
        if self.timeline is not None:
            from ..paths import atomic_write
            from ..share.timeline import timeline_events

            t0 = closed.t0
            regions = list(getattr(closed.profiler, "region_events", []) or [])
            data = timeline_events(
                report,
                window,
                chromium=result.chromium_events,
                regions=regions,
                wall0=self.wall0 - (self.perf0 - t0),
                perf0=t0,
            )
            try:
                written = atomic_write(self.timeline, json.dumps(data, indent=0) + "\n")
            except OSError as err:
                notes.append(f"timeline not written: {err}")
            else:
                timeline_file = str(written)
                notes.append(
                    "timeline on: torch's profiler recorded every operator to time the runs "
                    "of compiled code, which slows the cell, its compiles most"
                )
        return Shared(trace_file, compile_ids, tlparse_index, timeline_file)
