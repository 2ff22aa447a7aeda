"""torch.distributed, as a gather across ranks uses it (``--ranks``).

:func:`process_group_ready` looks ``torch.distributed`` up in
``sys.modules`` and imports nothing, so a process that never made a process
group pays a dictionary lookup; the others import ``torch.distributed``
when called, inside a group, and act on the default process group.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["gather_to_rank0", "process_group_ready", "rank_and_world"]


def process_group_ready() -> bool:
    """Whether this process is in an initialized ``torch.distributed`` group.

    Cheap: looks ``torch.distributed`` up in ``sys.modules`` (imports nothing)
    and asks it ``is_initialized()``.
    """
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return False
    try:
        return bool(dist.is_available() and dist.is_initialized())
    except Exception:
        return False


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def rank_and_world() -> tuple[int, int]:
    """This process's rank in the default process group, and the group's size."""
    dist = _dist()
    return dist.get_rank(), dist.get_world_size()


def gather_to_rank0(obj: Any, rank: int, world: int) -> list[Any] | None:
    """Every rank's ``obj`` on rank 0, in rank order (``dist.gather_object``,
    a collective: every rank of the group calls it); None on the others.
    ``rank`` and ``world`` are :func:`rank_and_world`'s."""
    out: list[Any] | None = [None] * world if rank == 0 else None
    _dist().gather_object(obj, out, dst=0)
    return out
