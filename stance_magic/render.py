"""Text and HTML views of reports and the history. Every user string is escaped."""

from __future__ import annotations

import html
from typing import Any, Iterable, Sequence

from .engine import stance_text
from .report import PHASE_LABELS, PHASES, CellReport, first_line


def fmt_s(s: float | None) -> str:
    """Seconds, readable: 1.23 s, 45.6 ms, 789 µs."""
    if s is None:
        return "n/a"
    a = abs(s)
    if a >= 1:
        return f"{s:.2f} s"
    if a >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    if a >= 1e-6 or a == 0:
        return f"{s * 1e6:.0f} µs" if a >= 1e-5 or a == 0 else f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.0f} ns"


def fmt_bytes(n: float | None, signed: bool = False) -> str:
    """Bytes, readable (decimal units): 64.0 MB, 812 kB, 0 B."""
    if n is None:
        return "n/a"
    sign = ("+" if n > 0 else "−" if n < 0 else "") if signed else ("−" if n < 0 else "")
    a = abs(n)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if a >= scale:
            return f"{sign}{a / scale:.1f} {unit}"
    return f"{sign}{a:.0f} B"


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
    nb = sum(g.count for g in rep.graph_break_details)
    rows.append(("graph breaks", str(nb), [f"{g.count}× {g}" for g in rep.graph_break_details]))
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
    if rep.eager_peak_bytes is not None:
        rows.append(
            (
                "memory peaks",
                f"eager {fmt_bytes(rep.eager_peak_bytes)} · compiled first run "
                f"{fmt_bytes(rep.compiled_first_peak_bytes)} · compiled steady "
                f"{fmt_bytes(rep.compiled_steady_peak_bytes)}",
                [],
            )
        )
    if rep.eager_s is not None:
        rows.append(("eager (steady)", fmt_s(rep.eager_s), []))
        rows.append(("compiled (steady)", fmt_s(rep.compiled_s), []))
        rows.append(("speedup", f"{rep.speedup:.2f}×" if rep.speedup else "n/a", []))
        be = (
            "never (compiled is not faster)"
            if rep.break_even_calls is None
            else f"{rep.break_even_calls} run{'s' if rep.break_even_calls != 1 else ''}"
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


def cell_label(rep: Any) -> str:
    """How reports, charts and the panel name a measured cell: IPython's
    ``In [7]`` when known, else its place in the history (``cell 3``)."""
    number = getattr(rep, "execution_count", None)
    if number:
        return f"In [{number}]"
    return f"cell {rep.index}" if getattr(rep, "index", 0) else ""


def _notes(rep: CellReport) -> list[str]:
    notes = list(rep.notes)
    if rep.memory_on:
        notes.append(
            "times taken with memory measuring on (-m): each allocation was reported to "
            "torch's profiler while the cell ran (reading the events back afterwards is "
            "not in the wall time)"
        )
    return notes


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
    return "\n".join(out)


CSS = (
    # doubled classes outrank JupyterLab's `.jp-RenderedHTMLCommon td` rules
    "<style>.sm-report.sm-report{border-collapse:collapse;font-size:12px;margin:4px 0;"
    "table-layout:auto;width:auto}"
    ".sm-report.sm-report td,.sm-report.sm-report th{padding:2px 8px;text-align:left;"
    "vertical-align:top;border-bottom:1px solid var(--jp-border-color2,#e0e0e0);"
    "white-space:nowrap}"
    ".sm-report.sm-report li,.sm-report.sm-report td.sm-err,"
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
        cls = ' class="sm-err"' if label == "error" else ""
        det = ""
        if details:
            det = "<ul>" + "".join(f"<li>{e(d)}</li>" for d in details[:MAX_DETAILS]) + "</ul>"
        if len(details) > MAX_DETAILS:
            rest = "".join(f"<li>{e(d)}</li>" for d in details[MAX_DETAILS:])
            det += (
                f"<details><summary>{e(_more(len(details) - MAX_DETAILS))}</summary>"
                f"<ul>{rest}</ul></details>"
            )
        rows.append(f"<tr><th>{e(label)}</th><td{cls}>{e(value)}{det}</td></tr>")
    notes = "".join(f"<tr><td colspan=2><i>{e(n)}</i></td></tr>" for n in _notes(rep))
    return (
        f'{CSS}<table class="sm-report"><caption>{e(title)}</caption>'
        + "".join(rows)
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

#: Shown when some cell of the history compiled with Inductor's caches.
CACHE_COLUMNS = (("cache_state", "caches"), ("fx_hits_misses", "FX hits/misses"))


def _columns(reports: Iterable[CellReport]) -> tuple[tuple[str, str], ...]:
    reports = list(reports)
    columns = HISTORY_COLUMNS
    if any(r.memory for r in reports):
        i = [k for k, _ in HISTORY_COLUMNS].index("guard_s") + 1
        columns = (*HISTORY_COLUMNS[:i], MEMORY_COLUMN, *HISTORY_COLUMNS[i:])
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


def shorten(text: str, width: int = 60) -> str:
    """One line of at most ``width`` characters (full text stays in the export)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


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


__all__ = ["History", "first_line", "fmt_s", "history_html", "history_text", "report_html"]


def advice_html(lines: Iterable[str]) -> str:
    items = "".join(f"<li>{html.escape(a)}</li>" for a in lines)
    return f'<ul class="sm-advice" style="margin:2px 0 6px;font-size:12px">{items}</ul>'


def _plural(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


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
        out.append(f"{r.where}: {r}")
        for f in r.failures[1:]:
            out.append(f"↳ also failed: {f}")
    return out


def _limit_value(lim: Any) -> str:
    text = f"{lim.where} is at {lim.setting} = {lim.limit if lim.limit is not None else '?'}"
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
    looked_up = [t for t in rep.guard_targets if t.timed or t.untimed]
    if len(looked_up) > 1 or any(t.untimed for t in looked_up):
        for t in looked_up:
            line = f"{t.name}"
            if t.where:
                line += f" ({t.where})"
            parts = []
            if t.timed:
                parts.append(f"{_plural(t.timed, 'lookup')} × {fmt_s(t.per_lookup_s)}")
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
