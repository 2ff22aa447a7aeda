"""CUDA and the clocks: timed spans that hold when kernels run asynchronously.

A CUDA kernel launch returns before the kernel has run, so a
``perf_counter()`` span around GPU work measures the launches, not the work.
:func:`sync_if_cuda` waits for the GPU at both ends of every span
stance_magic times (a cell's window, each ``--compare`` run), but only in a
process that has initialized CUDA: on a machine without CUDA, or a process
that never touched it, it costs a dictionary lookup and one call to
``torch.cuda.is_initialized()`` and synchronizes nothing
(``benchmarks/bench_sync.py`` measures it).

``torch`` is never imported here: a process that has not imported it has no
CUDA work to wait for.
"""

from __future__ import annotations

import sys

__all__ = ["cuda_in_use", "sync_if_cuda"]


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
