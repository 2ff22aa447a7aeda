"""Reports across ranks (``--ranks``, ``measure(ranks=True)``) as plain data:
each rank's :class:`RankSummary`, the :class:`RankFlag` findings (where the
ranks diverged, the slowest compile), and rank 0's :class:`RankReport` that
holds them.

Made by :mod:`stance_magic.builder.ranks` (the summary of a report, the
gather), worded by :mod:`stance_magic.render.ranks` and drawn by
:mod:`stance_magic.plots.ranks`. The flags are derived from the rows here
(:func:`divergence_flags`), so that a :class:`RankReport` made of rows alone
has them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, Sequence

from ..text import Shown, fmt_s, rank_groups, rank_groups_text, rank_set

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .cell import CellReport

__all__ = [
    "COMPARED",
    "MAX_BARS",
    "MAX_ROWS",
    "MODES",
    "Compared",
    "RankFlag",
    "RankReport",
    "RankSummary",
    "check_mode",
    "divergence_flags",
    "shown_rows",
]

#: Rows a combined view shows before it folds ranks that were not flagged.
MAX_ROWS = 16
#: Ranks drawn as bars in the chart; more are drawn as points
#: (:func:`stance_magic.plots.ranks_figure`).
MAX_BARS = 32

MODES = ("summary", "full")


def check_mode(mode: object) -> Literal["summary", "full"]:
    """``True`` (a summary per rank), ``"summary"`` or ``"full"``; anything
    else is a ``ValueError``."""
    if mode is True or mode == "summary":
        return "summary"
    if mode == "full":
        return "full"
    raise ValueError(f"ranks must be True, 'summary' or 'full', not {mode!r}")


@dataclass
class RankSummary:
    """What one rank sends rank 0 by default: a row of the combined view.

    Bounded in size whatever the cell did: at most
    :data:`~stance_magic.builder.ranks.MAX_REASONS` recompile reasons and
    graph breaks, each cut to :data:`~stance_magic.builder.ranks.MAX_CHARS`
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
        from ..plots import ranks_figure

        return ranks_figure(self, max_bars=MAX_BARS)

    # Rendering is delegated (text and HTML in render, the chart in plots).
    def text(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> str:
        """One row per rank, where they diverged, how the gather went (and,
        gathered in full, each rank's report with ``max_details`` per row,
        every row with ``verbose``; ``hints``: none here, hints come after
        the view)."""
        from ..render import MAX_DETAILS, ranks_text

        return ranks_text(self, MAX_DETAILS if max_details is None else max_details, verbose)

    def html(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> str:
        from ..render import MAX_DETAILS, ranks_html

        return ranks_html(self, MAX_DETAILS if max_details is None else max_details, verbose)


def shown_rows(view: RankReport) -> list[RankSummary]:
    """The rows a view shows: all of them up to :data:`MAX_ROWS`; beyond, rank 0,
    the flagged ranks and the slowest compile, up to :data:`MAX_ROWS`."""
    if len(view.rows) <= MAX_ROWS:
        return list(view.rows)
    keep = {0} | {r for f in view.flags for r in f.ranks}
    return [view.rows[r] for r in sorted(keep)[:MAX_ROWS]]


# -- divergence -----------------------------------------------------------------


def _groups(rows: Sequence[RankSummary], key: Any) -> list[tuple[Any, list[int]]]:
    """Ranks grouped by ``key(row)``; the largest group first (ties: the
    group with the lowest rank), so the others are the odd ones out."""
    return rank_groups((r.rank, key(r)) for r in rows)


def _split(groups: list[tuple[Any, list[int]]]) -> list[int]:
    return sorted(r for _, ranks in groups[1:] for r in ranks)


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
        return rank_groups_text(
            [(counts[ranks[0]], ranks) for _, ranks in g], lambda n: f"{n} break(s)"
        )
    return rank_groups_text(g, lambda d: "none" if not d else "a set of breaks")


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
        what = c.groups(rows, g) if c.groups else rank_groups_text(g, str)
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
