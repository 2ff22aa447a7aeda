"""CUDA and the clocks: timed spans that hold when kernels run asynchronously.

A CUDA kernel launch returns before the kernel has run, so a
``perf_counter()`` span around GPU work measures the launches, not the work.
:func:`sync_if_cuda` waits for the GPU at both ends of every span
stance_magic times (a cell's window, each ``--compare`` run), but only in a
process that has initialized CUDA: on a machine without CUDA, or a process
that never touched it, it costs a dictionary lookup and one call to
``torch.cuda.is_initialized()`` and synchronizes nothing
(``benchmarks/bench_sync.py`` measures it).

A compiled call's code on the GPU: :func:`stream_mark` records a CUDA event
on the current stream (where Inductor launches its kernels) where a timed
call's lookup ends and :meth:`StreamMarks.end` one where its compiled code
returns; :meth:`StreamMarks.seconds` reads the time between them once the
window has synchronized: from where the stream reached the compiled code's start
to the end of its last kernel. Compiled code whose kernels outlast the
host's launching of them (the GPU sets the pace) reads longer there than on
the host's clock; code whose GPU waits for the launches reads about the
host's time.

``torch`` is never imported here: a process that has not imported it has no
CUDA work to wait for.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["StreamMarks", "cuda_in_use", "stream_mark", "sync_if_cuda"]


def cuda_in_use() -> bool:
    """Whether this process has initialized CUDA (it has run or can run
    kernels asynchronously), without initializing it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:  # pragma: no cover - a torch without the call
        return False


def sync_if_cuda() -> bool:
    """Wait for the current CUDA device to finish its queued work, when this
    process has initialized CUDA; whether it did.

    The current device only: ``torch.cuda.synchronize()`` on a device the
    process never used would create a context there (hundreds of MB and a
    fraction of a second). Work queued on another device of the same cell is
    waited for by the time the cell reads its results anyway.

    An asynchronous CUDA error that surfaces here is not raised (the user's
    next synchronization raises it, as without stance_magic): the span is
    then reported as not synchronized.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    cuda = torch.cuda
    try:
        if not cuda.is_initialized():
            return False
    except Exception:  # pragma: no cover - a torch without the call
        return False
    try:
        cuda.synchronize()
    except RuntimeError:
        # an asynchronous CUDA error of the user's (a device-side assert):
        # left for the user's own next synchronization to raise, as it would
        # without stance_magic; this span is then not synchronized
        return False
    return True


class StreamMarks:
    """Two timing CUDA events on the current stream: ``start`` recorded when
    made (:func:`stream_mark`), ``end`` by :meth:`end`; both made at once, so
    the second one's making is not in the span."""

    __slots__ = ("_end", "_ended", "_start")

    def __init__(self, cuda: Any) -> None:
        self._start = cuda.Event(enable_timing=True)
        self._end = cuda.Event(enable_timing=True)
        self._ended = False
        self._start.record()

    def end(self) -> None:
        """Record the second event now."""
        try:
            self._end.record()
            self._ended = True
        except Exception:  # pragma: no cover - a CUDA error of the user's: no figure
            pass

    def seconds(self) -> float | None:
        """Seconds on the GPU between the two events, once the second has run
        (waits for it); None if it was never recorded or cannot say."""
        if not self._ended:
            return None
        try:
            self._end.synchronize()
            return float(self._start.elapsed_time(self._end)) / 1e3
        except Exception:  # pragma: no cover - a CUDA error of the user's: no figure
            return None


def stream_mark(cuda: Any) -> StreamMarks | None:
    """:class:`StreamMarks` with its first event recorded now, given
    ``torch.cuda`` of a process that has initialized CUDA (the caller asks
    :func:`cuda_in_use` or ``torch.cuda.is_initialized()``); None where CUDA
    events cannot be made."""
    try:
        return StreamMarks(cuda)
    except Exception:  # a torch without CUDA events, a CUDA error: no figure
        return None
