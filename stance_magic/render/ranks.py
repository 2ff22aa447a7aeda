"""A run across ranks (:class:`stance_magic.report.ranks.RankReport`) as text and
HTML: one row per rank, where they diverged, how the gather went, and each
rank's full report where the ranks sent theirs; the line a rank other than 0
shows (:class:`RankNote`), the line about every rank's session stance
(:func:`stances_line`) and what ``--ranks`` says without a process group
(:data:`NO_GROUP`)."""

from __future__ import annotations

import html
from typing import Any, Sequence

from ..text import fmt_bytes, fmt_s, rank_groups, rank_groups_text, shorten
from .cell import report_html, report_text
from .labels import RANK_COLUMNS as H
from .rows import MAX_DETAILS
from .styles import _ERR, _LI, _td, styled_table, text_table

__all__ = ["NO_GROUP", "RankNote", "ranks_html", "ranks_text", "stances_line"]

NO_GROUP = (
    "no torch.distributed process group in this process (call "
    "torch.distributed.init_process_group on every rank first, or run under torchrun)"
)


def _rank_columns(view: Any) -> list[tuple[str, Any]]:
    cols: list[tuple[str, Any]] = [(H["rank"], lambda r: str(r.rank))]
    if len({r.host for r in view.rows}) > 1:
        cols.append((H["host"], lambda r: r.host))
    cols += [
        (H["stance"], lambda r: r.stance),
        (H["wall_s"], lambda r: fmt_s(r.wall_s)),
        (H["compile_s"], lambda r: fmt_s(r.compile_s)),
        (H["compiles"], lambda r: str(r.compiles)),
        (H["recompiles"], lambda r: str(r.recompiles)),
        (H["graph_breaks"], lambda r: str(r.graph_breaks)),
        (H["hits_misses"], lambda r: f"{r.cache_hits}/{r.cache_misses}"),
        (H["lookup_s"], lambda r: fmt_s(r.lookup_s)),
    ]
    if any(r.peak_bytes is not None for r in view.rows):
        cols.append((H["peak_bytes"], lambda r: fmt_bytes(r.peak_bytes)))
    if any(r.refused for r in view.rows):
        cols.append((H["refused_recompiles"], lambda r: str(r.refused_recompiles)))
    if any(r.error for r in view.rows):
        cols.append((H["error"], lambda r: shorten(r.error, 48)))
    return cols


def _ranks_title(view: Any) -> str:
    n = view.execution_count
    which = f", In [{n}] on rank 0" if n is not None else ""
    return f"stance_magic across {view.world_size} ranks{which}"


def _gather_line(view: Any) -> str:
    what = "full reports" if view.mode == "full" else "summaries"
    return (
        f"gathered {what} with torch.distributed.gather_object in {fmt_s(view.gather_s)} at "
        f"rank 0 (waiting for the last rank included); rank 0 sent {fmt_bytes(view.payload_bytes)}"
    )


def _folded(view: Any, shown: list[Any]) -> str:
    n = len(view.rows) - len(shown)
    return (
        f"… {n} more rank{'s' if n != 1 else ''} not flagged (all rows: "
        "stance_magic.history()[-1].ranks.rows)"
        if n
        else ""
    )


def _flag_lines(view: Any) -> list[str]:
    if not view.divergent:
        if view.world_size > 1:
            head = [
                "no divergence: every rank ran the same stance and compiled, recompiled "
                "and broke its graphs alike"
            ]
        else:
            head = ["one rank: nothing to compare"]
    else:
        head = [f"DIVERGED: {f.message}" for f in view.divergent]
    return head + [f.message for f in view.flags if not f.divergence]


def ranks_text(view: Any, max_details: int = MAX_DETAILS, verbose: bool = False) -> str:
    """A :class:`~stance_magic.report.ranks.RankReport` as text: one row per rank,
    where they diverged, how the gather went."""
    cols = _rank_columns(view)
    shown = view.shown
    body = [[get(r) for _, get in cols] for r in shown]
    out = [_ranks_title(view), text_table([h for h, _ in cols], body, indent="  ")]
    folded = _folded(view, shown)
    if folded:
        out.append("  " + folded)
    out += [f"  {line}" for line in _flag_lines(view)]
    out.append(f"  note: {_gather_line(view)}")
    if view.mode == "full" and view.reports:
        for rank, rep in enumerate(view.reports):
            out.append(f"\n--- rank {rank} ---\n{report_text(rep, max_details, verbose)}")
    return "\n".join(out)


def ranks_html(view: Any, max_details: int = MAX_DETAILS, verbose: bool = False) -> str:
    """A :class:`~stance_magic.report.ranks.RankReport` as HTML (every string escaped);
    diverged ranks in the error colour."""
    e = html.escape
    cols = _rank_columns(view)
    shown = view.shown
    flagged = set(view.flagged_ranks)
    body = [
        ('<tr class="sm-err">' if r.rank in flagged else "<tr>")
        + "".join(
            _td(get(r), extra=f";{_ERR}" if r.rank in flagged else "", columns=len(cols))
            for _, get in cols
        )
        + "</tr>"
        for r in shown
    ]
    table = styled_table([h for h, _ in cols], body, _ranks_title(view))
    items = []
    folded = _folded(view, shown)
    if folded:
        items.append(f'<li style="{_LI}">{e(folded)}</li>')
    for line in _flag_lines(view):
        if line.startswith("DIVERGED: "):
            items.append(
                f'<li class="sm-err" style="{_LI};{_ERR}"><b>diverged</b>: '
                f"{e(line[len('DIVERGED: ') :])}</li>"
            )
        else:
            items.append(f'<li style="{_LI}">{e(line)}</li>')
    items.append(f'<li style="{_LI}"><i>{e(_gather_line(view))}</i></li>')
    parts = [
        table,
        f'<ul class="sm-ranks" style="margin:2px 0 6px;font-size:12px">{"".join(items)}</ul>',
    ]
    if view.mode == "full" and view.reports:
        for rank, rep in enumerate(view.reports):
            parts.append(
                f"<details><summary>rank {rank}: full report</summary>"
                f"{report_html(rep, max_details, verbose)}</details>"
            )
    return "".join(parts)


def stances_line(stances: Sequence[str], previous: str | None = None) -> str:
    """One line about every rank's session stance."""
    groups = rank_groups(enumerate(stances))
    was = f" (was: {previous} on rank 0)" if previous is not None else ""
    if len(groups) == 1:
        n = len(stances)
        return f"session stance: {stances[0]} on all {n} rank{'s' if n != 1 else ''}{was}"
    return f"session stances differ across ranks: {rank_groups_text(groups, str)}{was}"


class RankNote:
    """What a rank other than 0 shows after a gathered cell: one line."""

    compiled_anything = False

    def __init__(self, rep: Any) -> None:
        g = rep.gathered
        assert g is not None, "a report gathered from this rank"
        self.rep = rep
        self.text = (
            f"stance_magic: rank {g.rank} of {g.world_size}: {rep.compiles} compile(s), "
            f"{len(rep.recompiles)} recompile(s)"
            + (f", {shorten(rep.error, 80)}" if rep.error else "")
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
