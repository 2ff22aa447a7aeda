"""Text and HTML views of reports and the history. Every user string is escaped."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .report import PHASE_LABELS, PHASES, CellReport
from .share import share_html, share_text
from .stance import stance_text
from .text import cell_label, first_line, fmt_bytes, fmt_s, shorten
from .text import plural as _plural


def _stance_line(rep: CellReport) -> str:
    return stance_text(rep.stance, rep.skip_guard_eval_unsafe, rep.backend)


def _breakdown(rep: CellReport) -> str:
    parts = [
        f"{PHASE_LABELS[p]} {fmt_s(rep.compile_breakdown.get(p, 0.0))}"
        for p in PHASES
        if rep.compile_breakdown.get(p, 0.0) >= 1e-6
    ]
    return ", ".join(parts)


def report_rows(rep: CellReport) -> list[tuple[str, str, list[str]]]:
    """(label, value, detail lines) for each row of a cell report."""
    rows: list[tuple[str, str, list[str]]] = []
    rows.append(("stance", _stance_line(rep), []))
    rows.append(("wall time", fmt_s(rep.wall_s), []))
    comp = fmt_s(rep.compile_s)
    if rep.compile_s:
        comp += f"  ({_breakdown(rep)})"
    rows.append(("compile time", comp, []))
    rows.append(("compiles", _compiles_value(rep), [_frame_line(rep, f) for f in rep.frames]))
    rows.extend(_cache_rows(rep))
    rows.append(("recompiles", str(len(rep.recompiles)), _recompile_lines(rep)))
    for lim in rep.recompile_limits:
        rows.append(("recompile limit", _limit_value(lim), _limit_details(lim)))
    shown = [b for b in rep.recompile_budget if b.entries > 1 or b.near]
    if shown:
        full = rep.fullest
        value = str(full) if len(shown) == 1 else f"{len(shown)} frames; fullest: {full}"
        value += f" ({full.setting})"
        rows.append(("recompile budget", value, [str(b) for b in shown] if len(shown) > 1 else []))
    dyn = [d for d in rep.dynamic_shapes if d.dynamic]
    if dyn:
        details = []
        for d in dyn:
            details.append(f"{d.where}: {'; '.join(d.inputs)}" if d.where else "; ".join(d.inputs))
            details.extend(f"↳ {s}" for s in d.symbols + d.specialized)
        rows.append(("dynamic shapes", "; ".join(dyn[-1].inputs), details))
    if len(rep.causes) == 1:
        rows.append(("why it recompiled", str(rep.causes[0]), []))
    elif rep.causes:
        rows.append(
            ("why it recompiled", _plural(len(rep.causes), "cause"), [str(c) for c in rep.causes])
        )
    nb = rep.graph_break_count
    rows.append(("graph breaks", str(nb), _break_lines(rep.graph_break_details)))
    rows.append(("cache hits / misses", f"{rep.cache_hits} / {rep.cache_misses}", []))
    rows.append(("cache lookups", _guard_value(rep), _guard_details(rep)))
    for fig in rep.memory:
        rows.append(
            (
                f"memory ({fig.device})",
                f"peak {fmt_bytes(fig.peak_bytes)} above the start; "
                f"{fmt_bytes(fig.end_bytes, signed=True)} left at the end",
                [fig.method],
            )
        )
    if rep.stance == "eager_on_recompile" or rep.eager_fallbacks:
        why = (
            []
            if rep.stance == "eager_on_recompile"
            else ["eager_on_recompile was in force at those calls (set inside the cell)"]
        )
        rows.append(("eager fallbacks", str(rep.eager_fallbacks), why))
    if rep.stance == "fail_on_recompile" or rep.refused_recompiles:
        why = (
            []
            if rep.stance == "fail_on_recompile"
            else ["fail_on_recompile was in force at those calls (set inside the cell)"]
        )
        rows.append(
            (
                "refused recompiles",
                str(rep.refused_recompiles),
                why + [f"guard that failed: {g}" for g in rep.refused_guards],
            )
        )
    rows.extend(_eager_rows(rep))
    c = rep.compare
    if c is not None and c.eager_peak_bytes is not None:
        rows.append(
            (
                "memory peaks",
                f"eager {fmt_bytes(c.eager_peak_bytes)} · compiled first run "
                f"{fmt_bytes(c.compiled_first_peak_bytes)} · compiled steady "
                f"{fmt_bytes(c.compiled_steady_peak_bytes)}",
                [],
            )
        )
    if c is not None:
        rows.append(("eager (steady)", fmt_s(c.eager_s), []))
        rows.append(("compiled (steady)", fmt_s(c.compiled_s), []))
        rows.append(("speedup", f"{c.speedup:.2f}×" if c.speedup else "n/a", []))
        be = (
            "never (compiled is not faster)"
            if c.break_even_calls is None
            else f"{c.break_even_calls} run{'s' if c.break_even_calls != 1 else ''}"
        )
        rows.append(("break-even", be, []))
    if rep.error:
        rows.append(("error", rep.error, []))
    return rows


#: Detail lines shown under a row; the rest are folded (all stay in the
#: report's data and in the JSON export).
MAX_DETAILS = 8


def _more(n: int) -> str:
    return f"and {n} more (all in the report's data and %stance history --json)"


def _notes(rep: CellReport) -> list[str]:
    notes = list(rep.notes)
    if rep.memory_on:
        notes.append(
            "times taken with memory measuring on (-m): each allocation was reported to "
            "torch's profiler while the cell ran (reading the events back afterwards is "
            "not in the wall time)"
        )
    return notes


def _break_lines(breaks: Sequence[Any]) -> list[str]:
    """The graph-break to-do list: one line each, most costly first, with
    torch's documentation page."""
    out = []
    for g in breaks:
        line = g.todo()
        if getattr(g, "url", ""):
            line += f" · docs: {g.url}"
        out.append(line)
    return out


_URL = re.compile(r"(https?://[^\s<>&\"']+)")


def _linked(escaped: str) -> str:
    """Links in an escaped line made clickable (torch's documentation pages)."""
    return _URL.sub(r'<a href="\1" target="_blank" rel="noopener">\1</a>', escaped)


def report_text(rep: CellReport) -> str:
    which = cell_label(rep)
    title = f"stance_magic report, {which}" if which else "stance_magic report"
    rows = report_rows(rep)
    width = max(len(r[0]) for r in rows)
    out = [title]
    for label, value, details in rows:
        out.append(f"  {label:<{width}}  {value}")
        for d in details[:MAX_DETAILS]:
            out.append(f"  {'':<{width}}    - {d}")
        if len(details) > MAX_DETAILS:
            out.append(f"  {'':<{width}}    … {_more(len(details) - MAX_DETAILS)}")
    for note in _notes(rep):
        out.append(f"  note: {note}")
    out.extend(share_text(rep))
    return "\n".join(out)


CSS = (
    # doubled classes outrank JupyterLab's `.jp-RenderedHTMLCommon td` rules
    "<style>.sm-report.sm-report{border-collapse:collapse;font-size:12px;margin:4px 0;"
    "table-layout:auto;width:auto}"
    ".sm-report.sm-report td,.sm-report.sm-report th{padding:2px 8px;text-align:left;"
    "vertical-align:top;border-bottom:1px solid var(--jp-border-color2,#e0e0e0);"
    "white-space:nowrap}"
    ".sm-report.sm-report li,.sm-report.sm-report td.sm-err,.sm-report.sm-report td.sm-long,"
    ".sm-table.sm-table td:last-child{white-space:normal;min-width:12em}"
    ".sm-report.sm-report th{font-weight:600}"
    ".sm-report ul{margin:0;padding-left:16px}.sm-report caption{text-align:left;"
    "font-weight:600;padding-bottom:2px}.sm-err{color:var(--jp-error-color1,#b00020)}</style>"
)


def report_html(rep: CellReport) -> str:
    e = html.escape
    which = cell_label(rep)
    title = f"stance_magic · {which}" if which else "stance_magic"
    rows = []
    for label, value, details in report_rows(rep):
        # a long value (a recompile's cause, a limit) wraps instead of widening the table
        cls = (
            ' class="sm-err"' if label == "error" else ' class="sm-long"' if len(value) > 80 else ""
        )
        det = ""
        if details:
            det = (
                "<ul>"
                + "".join(f"<li>{_linked(e(d))}</li>" for d in details[:MAX_DETAILS])
                + "</ul>"
            )
        if len(details) > MAX_DETAILS:
            rest = "".join(f"<li>{_linked(e(d))}</li>" for d in details[MAX_DETAILS:])
            det += (
                f"<details><summary>{e(_more(len(details) - MAX_DETAILS))}</summary>"
                f"<ul>{rest}</ul></details>"
            )
        rows.append(f"<tr><th>{e(label)}</th><td{cls}>{e(value)}{det}</td></tr>")
    notes = "".join(f"<tr><td colspan=2><i>{e(n)}</i></td></tr>" for n in _notes(rep))
    return (
        f'{CSS}<table class="sm-report"><caption>{e(title)}</caption>'
        + "".join(rows)
        + share_html(rep)
        + notes
        + "</table>"
    )


HISTORY_COLUMNS = (
    ("cell", "cell"),
    ("execution_count", "In"),
    ("label", "code"),
    ("stance_label", "stance"),
    ("wall_s", "wall"),
    ("compile_s", "compile"),
    ("compiles", "compiles"),
    ("recompiles", "recompiles"),
    ("graph_breaks", "breaks"),
    ("cache_hits", "hits"),
    ("cache_misses", "misses"),
    ("guard_s", "guards"),
    ("error", "error"),
)


#: Shown when some cell of the history measured memory.
MEMORY_COLUMN = ("peak_bytes", "peak mem")
#: Shown when some frame of the history recompiled: its entries of the limit.
BUDGET_COLUMN = ("budget", "entries")

#: Shown when some cell of the history compiled with Inductor's caches.
CACHE_COLUMNS = (("cache_state", "caches"), ("fx_hits_misses", "FX hits/misses"))


def _columns(reports: Iterable[CellReport]) -> tuple[tuple[str, str], ...]:
    reports = list(reports)
    columns = HISTORY_COLUMNS
    if any(r.fullest is not None and (r.fullest.entries > 1 or r.fullest.near) for r in reports):
        i = [k for k, _ in columns].index("recompiles") + 1
        columns = (*columns[:i], BUDGET_COLUMN, *columns[i:])
    if any(r.memory for r in reports):
        i = [k for k, _ in columns].index("guard_s") + 1
        columns = (*columns[:i], MEMORY_COLUMN, *columns[i:])
    if any(getattr(r, "cache_state", "") for r in reports):
        i = [k for k, _ in columns].index("compile_s") + 1
        columns = (*columns[:i], *CACHE_COLUMNS, *columns[i:])
    return columns


def _cell(key: str, v: Any) -> str:
    if key.endswith("_s"):
        return fmt_s(v)
    if key.endswith("_bytes"):
        return fmt_bytes(v) if v is not None else ""
    text = "" if v is None else str(v)
    return shorten(text) if key == "error" else text


def text_table(head: Sequence[str], body: Sequence[Sequence[str]], indent: str = "") -> str:
    """Columns padded to their widest cell, a rule under the header."""
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]
    return "\n".join(indent + line for line in out)


def html_table(head: Sequence[str], body: Sequence[Sequence[str]], caption: str = "") -> str:
    """An escaped HTML table with the report style."""
    e = html.escape
    cap = f"<caption>{e(caption)}</caption>" if caption else ""
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    rows = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in body)
    return (
        f'{CSS}<div style="overflow-x:auto"><table class="sm-report sm-table">{cap}'
        f"<tr>{th}</tr>{rows}</table></div>"
    )


def _history_body(reports: Iterable[CellReport]) -> tuple[list[str], list[list[str]]]:
    reports = list(reports)
    columns = _columns(reports)
    rows = [r.summary_row() for r in reports]
    for row in rows:
        if row.get("cache_state"):
            row["fx_hits_misses"] = f"{row['fx_cache_hits']}/{row['fx_cache_misses']}"
        else:
            row["fx_hits_misses"] = ""
    return [h for _, h in columns], [[_cell(k, row[k]) for k, _ in columns] for row in rows]


def history_text(reports: Iterable[CellReport]) -> str:
    head, body = _history_body(reports)
    if not body:
        return "stance_magic history: no measured cells yet"
    return text_table(head, body)


def history_html(reports: Iterable[CellReport]) -> str:
    head, body = _history_body(reports)
    if not body:
        return "<p>stance_magic history: no measured cells yet</p>"
    return html_table(head, body)


class History(list):
    """The session's reports, oldest first, that display as a table."""

    def __str__(self) -> str:
        return history_text(self)

    def _repr_html_(self) -> str:
        return history_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


__all__ = [
    "History",
    "cell_label",
    "first_line",
    "fmt_bytes",
    "fmt_s",
    "history_html",
    "history_text",
    "ranks_html",
    "ranks_text",
    "report_html",
    "shorten",
    "summary_line",
]


# -- across ranks (stance_magic.ranks.RankReport) ------------------------------


def _rank_columns(view: Any) -> list[tuple[str, Any]]:
    cols: list[tuple[str, Any]] = [("rank", lambda r: str(r.rank))]
    if len({r.host for r in view.rows}) > 1:
        cols.append(("host", lambda r: r.host))
    cols += [
        ("stance", lambda r: r.stance),
        ("wall", lambda r: fmt_s(r.wall_s)),
        ("compile", lambda r: fmt_s(r.compile_s)),
        ("compiles", lambda r: str(r.compiles)),
        ("recompiles", lambda r: str(r.recompiles)),
        ("breaks", lambda r: str(r.graph_breaks)),
        ("hits/misses", lambda r: f"{r.cache_hits}/{r.cache_misses}"),
        ("guards", lambda r: fmt_s(r.guard_s)),
    ]
    if any(r.peak_bytes is not None for r in view.rows):
        cols.append(("peak memory", lambda r: fmt_bytes(r.peak_bytes)))
    if any(r.refused for r in view.rows):
        cols.append(("refused", lambda r: str(r.refused_recompiles)))
    if any(r.error for r in view.rows):
        cols.append(("error", lambda r: shorten(r.error, 48)))
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


def ranks_text(view: Any) -> str:
    """A :class:`~stance_magic.ranks.RankReport` as text: one row per rank,
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
            out.append(f"\n--- rank {rank} ---\n{rep}")
    return "\n".join(out)


def ranks_html(view: Any) -> str:
    """A :class:`~stance_magic.ranks.RankReport` as HTML (every string escaped);
    diverged ranks in the error colour."""
    e = html.escape
    cols = _rank_columns(view)
    shown = view.shown
    flagged = set(view.flagged_ranks)
    head = "".join(f"<th>{e(h)}</th>" for h, _ in cols)
    body = "".join(
        ('<tr class="sm-err">' if r.rank in flagged else "<tr>")
        + "".join(f"<td>{e(get(r))}</td>" for _, get in cols)
        + "</tr>"
        for r in shown
    )
    table = (
        f'{CSS}<div style="overflow-x:auto"><table class="sm-report sm-table">'
        f"<caption>{e(_ranks_title(view))}</caption><tr>{head}</tr>{body}</table></div>"
    )
    items = []
    folded = _folded(view, shown)
    if folded:
        items.append(f"<li>{e(folded)}</li>")
    for line in _flag_lines(view):
        if line.startswith("DIVERGED: "):
            items.append(f'<li class="sm-err"><b>diverged</b>: {e(line[len("DIVERGED: ") :])}</li>')
        else:
            items.append(f"<li>{e(line)}</li>")
    items.append(f"<li><i>{e(_gather_line(view))}</i></li>")
    parts = [
        table,
        f'<ul class="sm-ranks" style="margin:2px 0 6px;font-size:12px">{"".join(items)}</ul>',
    ]
    if view.mode == "full" and view.reports:
        for rank, rep in enumerate(view.reports):
            parts.append(
                f"<details><summary>rank {rank}: full report</summary>{report_html(rep)}</details>"
            )
    return "".join(parts)


def summary_line(rep: Any, session: Any = None) -> str:
    """One line about a measured cell, for the panel's live area header
    (``session``: the session stance, named when the cell ran under its own).

    Examples
    --------
    >>> from stance_magic.report import CellReport
    >>> summary_line(CellReport(stance="default", index=3, wall_s=0.5, compile_s=0.4, compiles=1))
    'cell 3 · default · 500.0 ms: 1 compile (400.0 ms), 0 cache hits'
    """
    stance = stance_text(rep.stance, rep.skip_guard_eval_unsafe, rep.backend)
    if session is not None and stance != str(session):
        stance += f" (its own; session: {session})"
    parts = []
    if rep.compiles or rep.backward_compiles:
        n = rep.compiles + rep.backward_compiles
        parts.append(f"{_plural(n, 'compile')} ({fmt_s(rep.compile_s)})")
    else:
        parts.append("nothing compiled")
    if rep.recompiles:
        parts.append(_plural(len(rep.recompiles), "recompile"))
    breaks = rep.graph_break_count
    if breaks:
        parts.append(_plural(breaks, "graph break"))
    if rep.eager_fallbacks:
        parts.append(_plural(rep.eager_fallbacks, "eager fallback"))
    if rep.refused_recompiles:
        parts.append(_plural(rep.refused_recompiles, "refused recompile"))
    eager = sum(getattr(rep, "eager_calls", {}).values())
    if eager:
        parts.append(f"{_plural(eager, 'call')} run eagerly")
    parts.append(_plural(rep.cache_hits, "cache hit"))
    for lim in getattr(rep, "recompile_limits", []):
        parts.append(f"{lim.where.split(' (')[0]} at its recompile limit")
    full = getattr(rep, "fullest", None)
    if full is not None and full.left == 1 and not getattr(rep, "recompile_limits", None):
        parts.append(f"{full.where.split(' (')[0]}: 1 recompile left")
    line = f"{cell_label(rep)} · {stance} · {fmt_s(rep.wall_s)}: {', '.join(parts)}"
    if rep.error:
        line += f" · failed: {rep.error}"
    return line


@dataclass
class BreakEntry:
    """One line of the session's graph-break to-do list."""

    kind: str
    place: str
    todo: str
    url: str
    count: int = 0
    frames_after: int = 0
    compile_s_after: float = 0.0
    cells: list[str] = field(default_factory=list)


class BreakList(list):
    """The session's graph breaks grouped by cause and place, most costly
    first (``stance_magic.breaks()``, ``%stance breaks``)."""

    @classmethod
    def of(cls, reports: Iterable[CellReport]) -> BreakList:
        groups: dict[tuple[str, str], BreakEntry] = {}
        for rep in reports:
            for g in rep.graph_break_details:
                place = g.user_where or g.where
                key = (g.kind, place)
                entry = groups.get(key)
                if entry is None:
                    entry = groups[key] = BreakEntry(g.kind, place, g.todo(), g.url)
                entry.count += g.count
                entry.frames_after += g.frames_after
                entry.compile_s_after += g.compile_s_after
                label = cell_label(rep)
                if label and label not in entry.cells:
                    entry.cells.append(label)
        return cls(sorted(groups.values(), key=lambda b: (-b.compile_s_after, -b.count)))

    def _rows(self) -> list[list[str]]:
        return [
            [
                str(b.count),
                b.todo.split(": ", 1)[1] if ": " in b.todo else b.todo,
                b.place,
                fmt_s(b.compile_s_after) if b.frames_after else "",
                ", ".join(b.cells),
                b.url,
            ]
            for b in self
        ]

    _HEAD = ("breaks", "cause (and hint)", "where", "compiled after", "cells", "docs")

    def __str__(self) -> str:
        if not self:
            return "stance_magic: no graph breaks in the measured cells"
        return "\n".join(
            f"{i}. {b.todo}"
            + (f"\n   docs: {b.url}" if b.url else "")
            + (f"\n   cells: {', '.join(b.cells)}" if b.cells else "")
            for i, b in enumerate(self, 1)
        )

    def _repr_html_(self) -> str:
        if not self:
            return "<p>stance_magic: no graph breaks in the measured cells</p>"
        e = html.escape
        th = "".join(f"<th>{e(h)}</th>" for h in self._HEAD)
        body = "".join(
            "<tr>" + "".join(f"<td>{_linked(e(c))}</td>" for c in row) + "</tr>"
            for row in self._rows()
        )
        return (
            f'{CSS}<div style="overflow-x:auto"><table class="sm-report sm-table">'
            f"<caption>graph breaks to fix, most costly first</caption><tr>{th}</tr>{body}"
            "</table></div>"
        )

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def advice_html(lines: Iterable[str]) -> str:
    items = "".join(f"<li>{html.escape(a)}</li>" for a in lines)
    return f'<ul class="sm-advice" style="margin:2px 0 6px;font-size:12px">{items}</ul>'


def _compiles_value(rep: CellReport) -> str:
    text = _plural(rep.compiles, "frame") + " traced"
    if rep.backward_compiles:
        text += f" + {_plural(rep.backward_compiles, 'backward graph')}"
    backends = sorted({f.backend for f in rep.frames if f.backend})
    text += f"; {_plural(rep.graphs, 'graph')} compiled"
    if backends:
        text += f" ({', '.join(backends)})"
    raised = sum(1 for f in rep.frames if f.failed and f.raised)
    eager = rep.failed_compiles - raised
    if raised:
        text += f"; {raised} FAILED"
    if eager:
        text += f"; {eager} not compiled (torch ran {'it' if eager == 1 else 'them'} eagerly)"
    return text


def _frame_line(rep: CellReport, f: Any) -> str:
    text = f"{f.where}: {fmt_s(f.seconds)}"
    tags = []
    if not f.graph and not f.failed:
        tags.append("no graph: nothing for a backend to compile")
    elif f.backend and len({g.backend for g in rep.frames if g.backend}) > 1:
        tags.append(f"backend {f.backend}")
    if f.during_eager_call:
        tags.append("during the eager first call")
    if f.failed:
        tags.append(f"FAILED, {f.failed}" if f.raised else f"not compiled, ran eagerly: {f.failed}")
    if tags:
        text += f" [{'; '.join(tags)}]"
    return text


def _guard_value(rep: CellReport) -> str:
    # A lookup is more than its guard checks (the frame's locals, the call
    # into Dynamo): the figure is named for what it times.
    if rep.guard_s is None:
        text = "time n/a"
    else:
        bound = "≥ " if rep.guard_bound else ""
        text = f"{bound}{fmt_s(rep.guard_s)}"
        if rep.guard_per_call_s is not None:
            text += f" ({fmt_s(rep.guard_per_call_s)} per timed lookup, median)"
    if rep.compiles:
        text += f"; {rep.guard_count} guards in the entries compiled here"
    return text


def _recompile_lines(rep: CellReport) -> list[str]:
    """Each recompile with torch's first reason, then the guard that failed on
    every other cache entry (torch's record keeps only the first)."""
    out = []
    for r in rep.recompile_details:
        line = f"{r.where}: {r}"
        others = [f.reason for f in r.failures[1:]]
        if others:
            line += f" (other entries failed on: {'; '.join(others)})"
        if getattr(r, "called_from", ""):
            line += f"; called from {r.called_from}"
        out.append(line)
    return out


def _limit_value(lim: Any) -> str:
    n = lim.limit if lim.limit is not None else "?"
    if getattr(lim, "per_call", False):
        text = f"{lim.where} is at the recompile_limit={n} of its torch.compile"
    else:
        text = f"{lim.where} is at {lim.setting} = {n}"
    if lim.compile_id:
        text = f"hit ({lim.compile_id}): {text}"
    if lim.eager_calls:
        text += f"; {_plural(lim.eager_calls, 'call')} ran eagerly because of it"
    return text


def _limit_details(lim: Any) -> list[str]:
    out = [
        "torch stops compiling a frame at its limit: every later call that no cache entry "
        "matches runs eagerly, silently"
    ]
    for f in lim.failures:
        out.append(f"guard that failed: {f}")
    return out


def _guard_details(rep: CellReport) -> list[str]:
    out = [rep.guard_method] if rep.guard_method else []
    if rep.guard_bound:
        out.append(rep.guard_bound)
    looked_up = [t for t in rep.guard_targets if t.timed or t.untimed or t.sampled]
    if len(looked_up) > 1 or any(t.untimed for t in looked_up):
        for t in looked_up:
            line = f"{t.name}"
            if t.where:
                line += f" ({t.where})"
            parts = []
            if t.timed:
                parts.append(f"{_plural(t.timed, 'lookup')} × {fmt_s(t.per_lookup_s)}")
            if t.sampled:
                parts.append(f"{t.sampled} more counted, not timed")
            if t.untimed:
                parts.append(f"{t.untimed} nested lookups not timed")
            out.append(f"{line}: {', '.join(parts)}")
    return out


_EAGER_WHY = {
    "force_eager": "force_eager: torch.compile ran the original code",
    "eager_on_recompile": "eager_on_recompile with no compiled code to use: no lookup, no compile",
    "default": "torch compiled nothing for them (their frames are in Dynamo's skip list)",
    "fail_on_recompile": "torch compiled nothing for them (their frames are in Dynamo's skip list)",
}


def _eager_rows(rep: CellReport) -> list[tuple[str, str, list[str]]]:
    rows: list[tuple[str, str, list[str]]] = []
    if rep.eager_first_calls:
        details = [
            "eager_then_compile runs a function's first call eagerly and compiles from the "
            "second, with dynamic shapes inferred from the first calls"
        ]
        if rep.compiles_during_eager_calls:
            details.append(
                f"meanwhile torch compiled {_plural(rep.compiles_during_eager_calls, 'frame')} "
                "that the eager call reached a second time (nested frames count their own "
                "calls: torch's behaviour)"
            )
        rows.append(("first calls run eagerly", _plural(rep.eager_first_calls, "call"), details))
    for stance, n in rep.eager_calls.items():
        if stance in ("eager_then_compile", "aot_eager_then_compile"):
            continue
        why = _EAGER_WHY.get(stance, stance)
        rows.append(("calls run eagerly", _plural(n, "call"), [why]))
    return rows


def _cache_rows(rep: CellReport) -> list[tuple[str, str, list[str]]]:
    """Compile time by where it came from: Dynamo tracing, then AOTAutograd's
    and Inductor's FX graph cache (hit: loaded; miss: generated), per compile."""
    if not rep.cache_verdict:
        return []
    from .report import cache_line

    details = [cache_line(f) for f in rep.frames if f.caches]
    return [("compile caches", rep.cache_verdict, details)]
