"""torch's profiler for a cell: cache-lookup events (``-g``), memory (``-m``)."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any, Iterator

from .version import require_torch
from .watch import default_note

#: The profiler event torch emits around each Dynamo cache lookup.
CACHE_LOOKUP_EVENT = "TorchDynamo Cache Lookup"
#: torch's profiler event around each run of compiled code, named with its compile id
COMPILED_REGION_EVENT = "Torch-Compiled Region: "
#: stance_magic's own profiler range at the start and at the end of a block:
#: read on both the profiler's clock and ``time.perf_counter()``, they place
#: the profiler's events on the cell's clock without converting between
#: clocks (torch converts its clock to Unix time by calibration, off by
#: milliseconds on a loaded machine).
ANCHOR_EVENT = "stance_magic: clock anchor"
ANCHOR_TRIES = 3


@contextlib.contextmanager
def quiet_fd2() -> Iterator[None]:
    """Kineto prints start/stop lines straight to file descriptor 2."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@dataclass
class MemoryFigure:
    """Bytes torch allocated on one device during a measured block."""

    device: str
    #: the most allocated at once above what was live when the block started
    peak_bytes: int
    #: allocated at the end, above the start (negative: the block freed more)
    end_bytes: int
    method: str
    #: allocation and free events read (the CPU method)
    events: int | None = None
    #: what the method changed that the user may notice
    note: str | None = None
    #: CUDA only: bytes the caching allocator held from the device at the end
    #: (``torch.cuda.memory_reserved``) and at most during the block
    #: (``max_memory_reserved``, its peak reset at the start); absolute, not
    #: above the start: what the device has given to this process's pool
    reserved_bytes: int | None = None
    peak_reserved_bytes: int | None = None


#: How the CPU figure is obtained (said in the report).
CPU_MEMORY_METHOD = "torch profiler memory events (every CPU allocation and free, summed in order)"
CUDA_MEMORY_METHOD = (
    "CUDA caching allocator statistics (memory_allocated, max_memory_allocated; "
    "memory_reserved, max_memory_reserved)"
)


class ProfilerBusy(RuntimeError):
    """Another torch profiler runs: torch allows one at a time."""


class CellProfiler:
    """torch's profiler for a block: cache lookups (``-g``), memory (``-m``), or both.

    * **lookups**: each ``TorchDynamo Cache Lookup`` event spans one lookup
      (building the frame's locals and running the guards); this needs every
      operator recorded, which slows the rest of the block.
    * **memory**: the CPU allocator reports every allocation and free to the
      profiler (``profile_memory``); summing them in order gives the bytes
      allocated above the start, its peak and its end. Alone, it records no
      operator (only the user-scope ranges), so the block runs at nearly its
      own speed; reading the events afterwards costs about 5 µs each, so a
      block with a million allocations pays seconds at its end.

    CUDA memory, when CUDA is in use, comes from the caching allocator's own
    statistics instead (its peak counter is reset at the start; the report
    says so).
    """

    def __init__(self, lookups: bool = False, memory: bool = False, regions: bool = False) -> None:
        require_torch()
        import torch
        from torch._C import _autograd, _profiler

        self.lookups = lookups
        self.memory = memory
        #: keep each run of compiled code (``Torch-Compiled Region: <id>``) for a timeline
        self.regions = regions
        #: (compile id, start on ``time.perf_counter()`` s, duration s), after :meth:`stop`
        self.region_events: list[tuple[str, float, float]] = []
        self._anchors: list[float] = []
        self._cuda: tuple[int, int, int] | None = None
        if _autograd._profiler_enabled():
            raise ProfilerBusy("another torch profiler is running (torch allows one at a time)")
        state = _profiler.ProfilerState.KINETO
        cfg = _profiler.ProfilerConfig(
            state, False, memory, False, False, False, _profiler._ExperimentalConfig()
        )
        activities = {_profiler.ProfilerActivity.CPU}
        # scopes: every operator for lookups; for memory alone only the user's
        # own record_function ranges, so operators are not recorded at all
        scopes = set() if lookups or regions else {_profiler.RecordScope.USER_SCOPE}
        if memory and _cuda_in_use(torch):
            dev = torch.cuda.current_device()
            before_peak = torch.cuda.max_memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            self._cuda = (dev, torch.cuda.memory_allocated(dev), before_peak)
        with quiet_fd2():
            _autograd._prepare_profiler(cfg, activities)
            _autograd._enable_profiler(cfg, activities, scopes)
        if regions:
            self._anchor()

    def _anchor(self) -> None:
        """Tiny profiler ranges, each with a perf_counter() reading inside
        (:func:`_on_perf_clock` keeps the shortest: least likely preempted)."""
        import torch

        for _ in range(ANCHOR_TRIES):
            with torch.autograd.profiler.record_function(ANCHOR_EVENT):
                self._anchors.append(time.perf_counter())

    def stop(self) -> tuple[list[float] | None, list[MemoryFigure]]:
        """(each lookup's seconds, or None; memory figures per device)."""
        import torch
        from torch._C import _autograd

        if self.regions:
            self._anchor()
        with quiet_fd2():
            result = _autograd._disable_profiler()
        events = result.events()
        lookups = None
        if self.lookups:
            lookups = [e.duration_ns() / 1e9 for e in events if e.name() == CACHE_LOOKUP_EVENT]
        if self.regions:
            self.region_events = _on_perf_clock(
                [e for e in events if e.name() == ANCHOR_EVENT],
                self._anchors,
                [
                    (e.name()[len(COMPILED_REGION_EVENT) :], e.start_ns(), e.duration_ns())
                    for e in events
                    if e.name().startswith(COMPILED_REGION_EVENT)
                ],
            )
        figures: list[MemoryFigure] = []
        if self.memory:
            cpu = _autograd.DeviceType.CPU
            mem = sorted(
                (e.start_ns(), e.nbytes())
                for e in events
                if e.name() == "[memory]" and e.device_type() == cpu
            )
            running = peak = 0
            for _, nbytes in mem:
                running += nbytes
                if running > peak:
                    peak = running
            figures.append(MemoryFigure("cpu", peak, running, CPU_MEMORY_METHOD, len(mem)))
        cuda = self._cuda
        note = None
        if cuda is not None:
            note = (
                "torch.cuda.max_memory_allocated() and max_memory_reserved() were reset at "
                f"the start of the block (the first stood at {cuda[2]} bytes)"
            )
        elif self.memory and _cuda_in_use(torch):
            # the block initialized CUDA: every figure since then is the block's
            cuda = (torch.cuda.current_device(), 0, 0)
            note = "CUDA was first used in this block: its figures count from its start"
        if cuda is not None:
            dev, start, _before_peak = cuda
            now = torch.cuda.memory_allocated(dev)
            peak = torch.cuda.max_memory_allocated(dev)
            figures.append(
                MemoryFigure(
                    f"cuda:{dev}",
                    max(peak - start, 0),
                    now - start,
                    CUDA_MEMORY_METHOD,
                    note=note,
                    reserved_bytes=int(torch.cuda.memory_reserved(dev)),
                    peak_reserved_bytes=int(torch.cuda.max_memory_reserved(dev)),
                )
            )
        return lookups, figures


class ProfilerWatch:
    """torch's profiler over one block, as a watch (see probe.watch): it
    starts with the block's window (:class:`CellProfiler`) and gives each
    lookup's seconds (or None) and the memory figures. Another profiler
    already running is a note ("not measured with the profiler: ..."),
    never the block's error."""

    name = "profiler"
    optional = True
    __slots__ = ("lookups", "memory", "profiler", "regions")

    def __init__(self, lookups: bool = False, memory: bool = False, regions: bool = False) -> None:
        self.lookups, self.memory, self.regions = lookups, memory, regions
        #: the block's profiler, once started (its region events feed a timeline)
        self.profiler: CellProfiler | None = None

    @property
    def empty(self) -> tuple[list[float] | None, list[MemoryFigure]]:
        return None, []

    def failure_note(self, err: BaseException) -> str:
        if isinstance(err, ProfilerBusy):
            return f"not measured with the profiler: {err}"
        return default_note("the profiler", err)

    def start(self, context: Any = None) -> CellProfiler:
        self.profiler = CellProfiler(lookups=self.lookups, memory=self.memory, regions=self.regions)
        return self.profiler

    def stop(
        self, mark: CellProfiler, error: BaseException | None = None
    ) -> tuple[list[float] | None, list[MemoryFigure]]:
        return mark.stop()

    def uninstall(self) -> None:
        """Nothing stays installed: the profiler stops with its block."""


def _cuda_in_use(torch: object) -> bool:
    """CUDA is available and this process initialized it (never initializes it)."""
    cuda = torch.cuda  # type: ignore[attr-defined]
    return bool(cuda.is_available() and cuda.is_initialized())


def _on_perf_clock(
    anchors: list, perf: list[float], spans: list[tuple[str, int, int]]
) -> list[tuple[str, float, float]]:
    """Profiler spans (name, start ns, duration ns) on ``perf_counter()``
    seconds, mapped through the anchor ranges: of those at the start and of
    those at the end, the shortest (its midpoint is when its ``perf`` was
    read, to half its duration); without both, nothing (never a guess)."""
    n = ANCHOR_TRIES
    if len(anchors) != 2 * n or len(perf) != 2 * n:
        return []
    ranges = sorted((a.start_ns(), a.duration_ns()) for a in anchors)

    def best(group: range) -> tuple[float, float]:
        i = min(group, key=lambda k: ranges[k][1])
        return ranges[i][0] + ranges[i][1] / 2, perf[i]

    (a0, p0), (a1, p1) = best(range(n)), best(range(n, 2 * n))
    scale = (p1 - p0) / ((a1 - a0) / 1e9) if a1 > a0 else 1.0
    return sorted(
        (name, p0 + (start - a0) / 1e9 * scale, dur / 1e9 * scale) for name, start, dur in spans
    )
