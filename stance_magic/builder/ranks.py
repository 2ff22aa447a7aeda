"""Reports across ranks: each rank's report gathered to rank 0 with torch.distributed.

Opt-in: ``stance_magic.measure(..., ranks=True)`` or ``%%stance --ranks``,
inside an initialized process group (``torch.distributed.init_process_group``,
as under ``torchrun`` or on ipyparallel engines). When the block ends, every
rank sends rank 0 a small fixed-size summary of its report (:func:`summarize`)
with torch's own ``dist.gather_object`` over the default process group;
``ranks="full"`` (``%%stance --ranks --full``) sends the whole report instead.
Rank 0 builds a :class:`~stance_magic.report.ranks.RankReport`: one row per
rank, and flags where the ranks diverged (compile or recompile counts, graph
breaks, stances, a ``fail_on_recompile`` refusal, an error) and which rank
compiled longest, which every other rank waits for at its next collective.

The gather is a collective: every rank of the group must run the block (as
with any collective, a rank that never gets there keeps the others waiting
until the process group's timeout). Without a process group, or without the
flag, nothing here runs: no collective, and ``torch.distributed`` is only
looked up in ``sys.modules`` (:func:`stance_magic.probe.process_group_ready`).
The rows and the flags are :mod:`stance_magic.report.ranks`'s, their words
:mod:`stance_magic.render.ranks`'s.
"""

from __future__ import annotations

import hashlib
import pickle
import socket
import time
from typing import Any

from .. import probe
from ..report import CellReport, Gathered
from ..report.ranks import RankReport, RankSummary, check_mode
from ..text import shorten
from . import with_ranks

__all__ = ["MAX_CHARS", "MAX_REASONS", "gather", "summarize"]

#: Bounds of a summary, so that its size does not grow with the cell.
MAX_REASONS = 3
MAX_CHARS = 200


def _cut(text: str | None, width: int = MAX_CHARS) -> str:
    return shorten(text or "", width)


def _break_key(g: Any) -> str:
    return f"{g.summary}|{g.line}|{g.source}"


def summarize(rep: CellReport, rank: int, host: str | None = None) -> RankSummary:
    """The fixed-size summary of a :class:`~stance_magic.report.CellReport`."""
    details = list(getattr(rep, "recompile_details", []) or [])
    reasons = tuple(_cut(f"{r.where}: {r.reason}") for r in details[:MAX_REASONS])
    breaks = list(getattr(rep, "graph_break_details", []) or [])
    keys = sorted(f"{_break_key(g)}|{g.count}" for g in breaks)
    digest = hashlib.blake2b("\n".join(keys).encode(), digest_size=8).hexdigest() if keys else ""
    guards = list(getattr(rep, "refused_guards", []) or [])
    return RankSummary(
        rank=rank,
        host=_cut(socket.gethostname() if host is None else host, 64),
        stance=rep.stance_label,
        execution_count=rep.execution_count,
        wall_s=rep.wall_s,
        compile_s=rep.compile_s,
        compiles=rep.compiles,
        backward_compiles=rep.backward_compiles,
        failed_compiles=rep.failed_compiles,
        recompiles=len(rep.recompiles),
        recompile_reasons=reasons,
        graph_breaks=sum(g.count for g in breaks),
        break_digest=digest,
        break_samples=tuple(
            _cut(f"{g.count}× {g.where}: {g.summary}") for g in breaks[:MAX_REASONS]
        ),
        compiled_calls=rep.compiled_calls,
        cache_hits=rep.cache_hits,
        cache_misses=rep.cache_misses,
        lookup_s=rep.lookups.seconds,
        guard_count=rep.guard_count,
        eager_fallbacks=rep.eager_fallbacks,
        refused_recompiles=rep.refused_recompiles,
        refused_guard=_cut(guards[0]) if guards else "",
        error=_cut(rep.error),
        peak_bytes=rep.peak_bytes,
    )


def gather(rep: CellReport, mode: bool | str = "summary") -> CellReport:
    """Gather every rank's report of one block to rank 0 (a collective), and
    return this rank's report completed by it.

    Every rank of the default process group must call it. On rank 0 the
    report has the combined view, a :class:`~stance_magic.report.ranks.RankReport`
    (``rep.ranks``); on every other rank it says which rank its report went to
    (``rep.gathered_to``). ``mode`` is ``"summary"`` (a fixed-size
    :class:`~stance_magic.report.ranks.RankSummary` per rank) or ``"full"``
    (every rank's whole report too). The engine calls it for a block measured
    with ``ranks=``.

    Examples
    --------
    Under ``torchrun --nproc-per-node 2``, on every rank::

        >>> with stance_magic.measure(ranks=True) as rep:
        ...     y = cmodel(x)
        >>> if rep.ranks is not None:   # rank 0
        ...     print(rep.ranks)
    """
    mode = check_mode(mode)
    rank, world = probe.rank_and_world()
    summary = summarize(rep, rank)
    payload: Any = summary.to_wire()
    if mode == "full":
        payload = (payload, rep)
    t0 = time.perf_counter()
    out = probe.gather_to_rank0(payload, rank, world)
    gather_s = time.perf_counter() - t0
    gathered = Gathered(rank=rank, world_size=world, to=0, mode=mode)
    if rank != 0:
        return with_ranks(rep, gathered)
    assert out is not None
    size = len(pickle.dumps(payload))  # what rank 0 sent (torch pickles it the same way)
    if mode == "full":
        rows = [RankSummary.from_wire(w) for w, _ in out]
        reports = [r for _, r in out]
        reports[0] = rep
    else:
        rows = [RankSummary.from_wire(w) for w in out]
        reports = None
    view = RankReport(
        world_size=world,
        rows=rows,
        mode=mode,
        reports=reports,
        gather_s=gather_s,
        payload_bytes=size,
    )
    return with_ranks(rep, gathered, view)
