"""The results of a cell run besides once, as text and HTML: ``--compare``'s
(:class:`~stance_magic.report.results.CompareResult`: its report, then every
run's time) and ``--sweep``'s (:class:`~stance_magic.report.results.SweepResult`:
a row per stance, then each stance against default). The comparison's own
rows in a report are :mod:`.compare`'s."""

from __future__ import annotations

import html
from typing import Any, Sequence

from ..text import fmt_bytes, fmt_s, shorten
from .cell import report_html, report_text
from .labels import LOOKUPS_COLUMN, PEAK_MEMORY
from .styles import html_table, text_table


def runs_line(result: Any) -> str:
    """Every run's time of a ``--compare`` result, eager then compiled."""
    return (
        "  runs: eager "
        + ", ".join(fmt_s(t) for t in result.eager_runs)
        + " | compiled "
        + ", ".join(fmt_s(t) for t in result.compiled_runs)
    )


def compare_text(result: Any, max_details: int, verbose: bool, hints: Sequence[str]) -> str:
    """A ``--compare`` result as text: its report with ``hints`` (every row
    with ``verbose``), then every run's time."""
    return f"{report_text(result.report, max_details, verbose, hints)}\n{runs_line(result)}"


def compare_views(
    result: Any, max_details: int, verbose: bool, hints: Sequence[str]
) -> tuple[str, str]:
    """A ``--compare`` result as (text, HTML), the hints given once for both."""
    return (
        compare_text(result, max_details, verbose, hints),
        report_html(result.report, max_details, verbose, hints),
    )


#: ``--sweep``'s columns (peak memory after the cache lookups with ``-m``).
SWEEP_HEAD = (
    "stance",
    "wall",
    "compile",
    "compiles",
    "recompiles",
    "hits/misses",
    LOOKUPS_COLUMN,
    "fallbacks/refused",
    "error",
)

SWEEP_CAPTION = "stance_magic sweep (each stance from cold compiled caches)"


def sweep_head(memory: bool) -> tuple[str, ...]:
    """The sweep table's columns."""
    if not memory:
        return SWEEP_HEAD
    i = SWEEP_HEAD.index(LOOKUPS_COLUMN) + 1
    return (*SWEEP_HEAD[:i], PEAK_MEMORY, *SWEEP_HEAD[i:])


def sweep_caption(memory: bool) -> str:
    if memory:
        return SWEEP_CAPTION[:-1] + "; peak memory of a second first run of each)"
    return SWEEP_CAPTION


def sweep_rows(result: Any) -> list[list[str]]:
    """One row per stance of a sweep."""
    out = []
    for r in result.reports:
        row = [
            r.stance_label,
            fmt_s(r.wall_s),
            fmt_s(r.compile_s),
            str(r.compiles),
            str(len(r.recompiles)),
            f"{r.cache_hits}/{r.cache_misses}",
            fmt_s(r.lookups.seconds),
        ]
        if result.memory:
            row.append(fmt_bytes(r.peak_bytes))
        row += [str(r.eager_fallbacks or r.refused_recompiles or ""), shorten(r.error or "")]
        out.append(row)
    return out


def against_lines(result: Any) -> list[str]:
    """One line per stance against default: its diff's headline, the
    cells named by their stances."""
    out = []
    for d in result.against_default():
        st = d.row("stance")
        name = st.b if st is not None else d.b
        line = d.headline.split(": ", 1)[1] if ": " in d.headline else d.headline
        # the stance is the line's name: not again as its cause
        line = line.replace(f": stance default → {name}, ", ": ").replace(
            f": stance default → {name}", ""
        )
        out.append(f"{name} vs default: {line}")
    return out


def sweep_text(result: Any) -> str:
    """A sweep as text: the table, then each stance against default."""
    lines = against_lines(result)
    against = (
        "\n  each stance against default (%stance diff default STANCE for the rows):\n"
        + "\n".join(f"    {x}" for x in lines)
        if lines
        else ""
    )
    head = sweep_head(result.memory)
    return (
        sweep_caption(result.memory) + "\n" + text_table(head, sweep_rows(result), indent="  ")
    ) + against


def sweep_html(result: Any) -> str:
    """A sweep as HTML (every string escaped)."""
    lines = against_lines(result)
    against = (
        '<div style="font-size:12px;text-align:left">each stance against default '
        '(<code>%stance diff default STANCE</code> for the rows):<ul style="margin:0">'
        + "".join(f"<li>{html.escape(x)}</li>" for x in lines)
        + "</ul></div>"
        if lines
        else ""
    )
    head = sweep_head(result.memory)
    return html_table(head, sweep_rows(result), caption=sweep_caption(result.memory)) + against
