"""Reports across ranks: each rank's report gathered to rank 0 with torch.distributed.

Opt-in: ``stance_magic.measure(..., ranks=True)`` or ``%%stance --ranks``,
inside an initialized process group (``torch.distributed.init_process_group``,
as under ``torchrun`` or on ipyparallel engines). When the block ends, every
rank sends rank 0 a small fixed-size summary of its report with torch's own
``dist.gather_object`` over the default process group; ``ranks="full"``
(``%%stance --ranks --full``) sends the whole report instead. Rank 0 builds a
:class:`RankReport`: one row per rank, and flags where the ranks diverged
(compile or recompile counts, graph breaks, stances, a ``fail_on_recompile``
refusal, an error) and which rank compiled longest, which every other rank
waits for at its next collective.

The gather is a collective: every rank of the group must run the block (as
with any collective, a rank that never gets there keeps the others waiting
until the process group's timeout). Without a process group, or without the
flag, nothing here runs: no collective, and ``torch.distributed`` is only
looked up in ``sys.modules``.
"""

from __future__ import annotations

import hashlib
import html
import pickle
import socket
import sys
import time
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence

from .text import Shown, fmt_s

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .report import CellReport

__all__ = [
    "RankFlag",
    "RankReport",
    "RankSummary",
    "check_mode",
    "gather",
    "process_group_ready",
    "session_stances",
    "summarize",
]

#: Bounds of a summary, so that its size does not grow with the cell.
MAX_REASONS = 3
MAX_CHARS = 200
#: Rows a combined view shows before it folds ranks that were not flagged.
MAX_ROWS = 16
#: Ranks drawn as bars in the chart; more are drawn as points
#: (:func:`stance_magic.plots.ranks_figure`).
MAX_BARS = 32

MODES = ("summary", "full")


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


def _cut(text: str | None, width: int = MAX_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class RankSummary:
    """What one rank sends rank 0 by default: a row of the combined view.

    Bounded in size whatever the cell did: at most :data:`MAX_REASONS`
    recompile reasons and graph breaks, each cut to :data:`MAX_CHARS`
    characters; the set of graph breaks travels as a digest, so that ranks
    can be compared without sending every break.
    """

    rank: int
    host: str = ""
    stance: str = "default"
    execution_count: int | None = None
    wall_s: float = 0.0
    compile_s: float = 0.0
    compiles: int = 0
    backward_compiles: int = 0
    failed_compiles: int = 0
    recompiles: int = 0
    #: the first recompiles, ``where: reason``
    recompile_reasons: tuple[str, ...] = ()
    graph_breaks: int = 0
    #: a digest of the graph-break set (kind, line, source; no file paths,
    #: which differ between processes for notebook cells)
    break_digest: str = ""
    break_samples: tuple[str, ...] = ()
    compiled_calls: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    lookup_s: float | None = None
    guard_count: int = 0
    eager_fallbacks: int = 0
    refused_recompiles: int = 0
    refused_guard: str = ""
    error: str = ""
    peak_bytes: int | None = None

    def to_wire(self) -> tuple[Any, ...]:
        """A plain tuple (no field names, no class): what is pickled and sent."""
        return tuple(getattr(self, f.name) for f in fields(self))

    @classmethod
    def from_wire(cls, wire: Sequence[Any]) -> RankSummary:
        return cls(*wire)

    @property
    def refused(self) -> bool:
        return bool(self.refused_recompiles or self.refused_guard)


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


@dataclass
class RankFlag:
    """One finding across ranks: where they diverged, or the slowest compile."""

    kind: str  # stance, compiles, recompiles, graph_breaks, refused, error, slowest
    ranks: list[int]
    message: str
    #: False for a plain fact (the slowest compile), True where ranks differ
    divergence: bool = True


@dataclass
class RankReport(Shown):
    """Every rank's report of one measured block, combined on rank 0.

    ``rows`` has one :class:`RankSummary` per rank (rank order); ``reports``
    holds every rank's full :class:`~stance_magic.report.CellReport` when
    they were gathered in full (``gather="full"``), else None. ``flags`` say
    where the ranks diverged. ``gather_s`` is the time rank 0 spent in the
    gather, waiting for the last rank to finish the block included;
    ``payload_bytes`` is the size of what rank 0 itself sent.
    """

    world_size: int
    rows: list[RankSummary]
    mode: Literal["summary", "full"] = "summary"
    reports: list[CellReport] | None = None
    flags: list[RankFlag] = field(default_factory=list)
    gather_s: float = 0.0
    payload_bytes: int = 0

    def __post_init__(self) -> None:
        if not self.flags:
            self.flags = divergence_flags(self.rows)

    @property
    def execution_count(self) -> int | None:
        return self.rows[0].execution_count if self.rows else None

    @property
    def divergent(self) -> list[RankFlag]:
        """The flags where ranks differ (the slowest compile is not one)."""
        return [f for f in self.flags if f.divergence]

    @property
    def flagged_ranks(self) -> list[int]:
        return sorted({r for f in self.divergent for r in f.ranks})

    @property
    def compiled_anything(self) -> bool:
        return any(r.compiles or r.backward_compiles for r in self.rows) or bool(self.divergent)

    def row(self, rank: int) -> RankSummary:
        return self.rows[rank]

    @property
    def shown(self) -> list[RankSummary]:
        """The rows a view shows: all of them up to :data:`MAX_ROWS`; beyond, rank 0,
        the flagged ranks and the slowest compile, up to :data:`MAX_ROWS`."""
        return shown_rows(self)

    def figure(self) -> Figure:
        """Compile, cache lookups and execution per rank, divergent ranks in red."""
        from .plots import ranks_figure

        return ranks_figure(self, max_bars=MAX_BARS)

    # Rendering is delegated (text and HTML in render, the chart in plots).
    def text(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> str:
        """One row per rank, where they diverged, how the gather went (and,
        gathered in full, each rank's report with ``max_details`` per row,
        every row with ``verbose``; ``hints``: none here, hints come after
        the view)."""
        from .render import MAX_DETAILS, ranks_text

        return ranks_text(self, MAX_DETAILS if max_details is None else max_details, verbose)

    def html(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> str:
        from .render import MAX_DETAILS, ranks_html

        return ranks_html(self, MAX_DETAILS if max_details is None else max_details, verbose)


# -- divergence -----------------------------------------------------------------


def rank_set(ranks: Iterable[int]) -> str:
    """``rank 3`` / ``ranks 0-2, 5``: consecutive ranks as ranges."""
    rs = sorted(set(ranks))
    if len(rs) == 1:
        return f"rank {rs[0]}"
    parts: list[str] = []
    start = prev = rs[0] if rs else 0
    for r in [*rs[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return "ranks " + ", ".join(parts)


def _groups(rows: Sequence[RankSummary], key: Any) -> list[tuple[Any, list[int]]]:
    """Ranks grouped by ``key(row)``; the largest group first (ties: the
    group with the lowest rank), so the others are the odd ones out."""
    groups: dict[Any, list[int]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r.rank)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))


def _split(groups: list[tuple[Any, list[int]]]) -> list[int]:
    return sorted(r for _, ranks in groups[1:] for r in ranks)


def _by_group(groups: list[tuple[Any, list[int]]], fmt: Any) -> str:
    return "; ".join(f"{fmt(value)} on {rank_set(ranks)}" for value, ranks in groups)


def _examples(rows: Sequence[RankSummary], ranks: list[int], get: Any, limit: int = 3) -> str:
    """``rank 1: <first item>`` for the first few odd ranks that have one."""
    by_rank = {r.rank: r for r in rows}
    out = []
    for rank in ranks:
        items = get(by_rank[rank])
        if items:
            out.append(f"rank {rank}: {items[0]}")
        if len(out) == limit:
            break
    return "; ".join(out)


def _breaks_differ(rows: Sequence[RankSummary], g: list[tuple[Any, list[int]]]) -> str:
    """Graph-break sets differ: by their counts when those tell the groups apart."""
    counts = {r.rank: r.graph_breaks for r in rows}
    if all(len({counts[r] for r in ranks}) == 1 for _, ranks in g):
        return _by_group([(counts[ranks[0]], ranks) for _, ranks in g], lambda n: f"{n} break(s)")
    return _by_group(g, lambda d: "none" if not d else "a set of breaks")


@dataclass(frozen=True)
class Compared:
    """A figure every rank should agree on: a row of :data:`COMPARED`."""

    kind: str
    #: the figure of one rank's summary
    key: Any
    #: the flag's message starts with this
    headline: str
    #: how the groups of ranks read (default: each value, the ranks with it)
    groups: Any = None
    #: a rank's own items that say why (its recompile reasons, its breaks)
    examples: Any = None


#: What divergence_flags compares across ranks, in the order it reports them.
COMPARED: tuple[Compared, ...] = (
    Compared("stance", lambda r: r.stance, "ranks ran under different stances"),
    Compared("compiles", lambda r: r.compiles, "compile counts differ"),
    Compared(
        "recompiles",
        lambda r: r.recompiles,
        "recompile counts differ",
        examples=lambda r: r.recompile_reasons,
    ),
    Compared(
        "graph_breaks",
        lambda r: r.break_digest,
        "graph breaks differ",
        groups=_breaks_differ,
        examples=lambda r: r.break_samples,
    ),
)


def divergence_flags(rows: Sequence[RankSummary]) -> list[RankFlag]:
    """Where the ranks' summaries differ (:data:`COMPARED`, then refusals and
    errors), and the slowest compile."""
    flags: list[RankFlag] = []
    if not rows:
        return flags
    for c in COMPARED:
        g = _groups(rows, c.key)
        if len(g) < 2:
            continue
        odd = _split(g)
        what = c.groups(rows, g) if c.groups else _by_group(g, str)
        why = ""
        if c.examples is not None:
            why = _examples(rows, odd, c.examples) or _examples(
                rows, [rk for _, rks in g for rk in rks], c.examples
            )
        flags.append(RankFlag(c.kind, odd, f"{c.headline}: {what}" + (f" ({why})" if why else "")))
    refused = [r for r in rows if r.refused]
    for guard, ranks in _groups(refused, lambda r: r.refused_guard):
        text = f"{rank_set(ranks)} refused to recompile under fail_on_recompile"
        text += f"; guard that failed: {guard}" if guard else ""
        flags.append(RankFlag("refused", ranks, text))
    errors = [r for r in rows if r.error and not r.refused]
    for err, ranks in _groups(errors, lambda r: r.error):
        flags.append(
            RankFlag("error", ranks, f"{rank_set(ranks)} raised {err}", len(ranks) < len(rows))
        )
    compiled = [r for r in rows if r.compile_s > 0]
    if compiled and len(rows) > 1:
        slow = max(compiled, key=lambda r: r.compile_s)
        others = sorted(r.compile_s for r in rows if r.rank != slow.rank)
        if len(others) == 1:
            other = next(r for r in rows if r.rank != slow.rank)
            rest = f"rank {other.rank}: {fmt_s(other.compile_s)}"
        else:
            rest = f"the others: {fmt_s(others[0])} to {fmt_s(others[-1])}, median " + fmt_s(
                others[len(others) // 2]
            )
        flags.append(
            RankFlag(
                "slowest",
                [slow.rank],
                f"slowest compile: rank {slow.rank}, {fmt_s(slow.compile_s)}, which every other "
                f"rank waits for at its next collective ({rest})",
                divergence=False,
            )
        )
    return flags


# -- gathering --------------------------------------------------------------------


def check_mode(mode: object) -> Literal["summary", "full"]:
    """``True`` (a summary per rank), ``"summary"`` or ``"full"``; anything
    else is a ``ValueError``."""
    if mode is True or mode == "summary":
        return "summary"
    if mode == "full":
        return "full"
    raise ValueError(f"ranks must be True, 'summary' or 'full', not {mode!r}")


def gather(rep: CellReport, mode: bool | str = "summary") -> CellReport:
    """Gather every rank's report of one block to rank 0 (a collective), and
    return this rank's report completed by it.

    Every rank of the default process group must call it. On rank 0 the
    report has the combined view, a :class:`RankReport` (``rep.ranks``); on
    every other rank it says which rank its report went to
    (``rep.gathered_to``). ``mode`` is ``"summary"`` (a fixed-size
    :class:`RankSummary` per rank) or ``"full"`` (every rank's whole report
    too). The engine calls it for a block measured with ``ranks=``.

    Examples
    --------
    Under ``torchrun --nproc-per-node 2``, on every rank::

        >>> with stance_magic.measure(ranks=True) as rep:
        ...     y = cmodel(x)
        >>> if rep.ranks is not None:   # rank 0
        ...     print(rep.ranks)
    """
    from .builder import with_ranks
    from .report import Gathered

    mode = check_mode(mode)
    dist = _dist()
    rank, world = dist.get_rank(), dist.get_world_size()
    summary = summarize(rep, rank)
    payload: Any = summary.to_wire()
    if mode == "full":
        payload = (payload, rep)
    out: list[Any] | None = [None] * world if rank == 0 else None
    t0 = time.perf_counter()
    dist.gather_object(payload, out, dst=0)
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


NO_GROUP = (
    "no torch.distributed process group in this process (call "
    "torch.distributed.init_process_group on every rank first, or run under torchrun)"
)


def session_stances(stance: object) -> list[str] | None:
    """Every rank's session stance, on rank 0 (a collective; None elsewhere).

    ``stance`` is this rank's. ``%stance NAME --ranks`` sets the stance and
    then calls this, so that rank 0 can say whether all ranks agree.
    """
    dist = _dist()
    rank, world = dist.get_rank(), dist.get_world_size()
    out: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(str(stance), out, dst=0)
    return out


def stances_line(stances: Sequence[str], previous: str | None = None) -> str:
    """One line about every rank's session stance."""
    groups = _groups(
        [RankSummary(rank=i, stance=s) for i, s in enumerate(stances)], lambda r: r.stance
    )
    was = f" (was: {previous} on rank 0)" if previous is not None else ""
    if len(groups) == 1:
        n = len(stances)
        return f"session stance: {stances[0]} on all {n} rank{'s' if n != 1 else ''}{was}"
    return f"session stances differ across ranks: {_by_group(groups, str)}{was}"


def shown_rows(view: RankReport) -> list[RankSummary]:
    """The rows a view shows: all of them up to :data:`MAX_ROWS`; beyond, rank 0,
    the flagged ranks and the slowest compile, up to :data:`MAX_ROWS`."""
    if len(view.rows) <= MAX_ROWS:
        return list(view.rows)
    keep = {0} | {r for f in view.flags for r in f.ranks}
    return [view.rows[r] for r in sorted(keep)[:MAX_ROWS]]


class RankNote:
    """What a rank other than 0 shows after a gathered cell: one line."""

    compiled_anything = False

    def __init__(self, rep: CellReport) -> None:
        g = rep.gathered
        assert g is not None, "a report gathered from this rank"
        self.rep = rep
        self.text = (
            f"stance_magic: rank {g.rank} of {g.world_size}: {rep.compiles} compile(s), "
            f"{len(rep.recompiles)} recompile(s)"
            + (f", {_cut(rep.error, 80)}" if rep.error else "")
            + f"; the combined view is on rank {g.to} (this rank's report: "
            "stance_magic.history()[-1])"
        )

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return (
            '<div class="sm-notice" style="font-size:12px;color:#555;margin:2px 0">'
            f"{html.escape(self.text)}</div>"
        )


def to_show(rep: CellReport, plot: bool) -> tuple[CellReport | RankReport | RankNote, bool]:
    """What a cell gathered across ranks displays, with whether to chart it:
    rank 0 the combined view, another rank one line, an interrupted cell
    (nothing gathered) its own report."""
    if rep.ranks is not None:
        return rep.ranks, plot
    if rep.gathered is not None:
        return RankNote(rep), False
    return rep, plot
