"""Text and HTML views of reports and the history: every sentence a report
shows is made here, from the report's numbers and names. Every user string
is escaped.

Reports come in as the plain data of :mod:`stance_magic.report`, read by
their fields: this package imports no report class (the report's own
``text()`` and ``html()`` hand themselves over to it, one way).

The views take ``max_details``: how many detail lines a row shows before the
rest fold (``StanceMagics.max_details``, which the magics hand to IPython's
formatters for the session; :data:`MAX_DETAILS` otherwise).

The package is laid out by the report's sections: a figure's words are made
in the module of its section's name, its labels are in :mod:`.labels`.

* ``labels``: every label: the rows' names, the column headers, the
  phases', caches' and kernel parts' names, the words for how a call ended,
  the docs each row links to.
* ``styles``: the inline CSS and the table helpers (``text_table``,
  ``html_table``, ``styled_table``); ``links``: URLs made into links.
* ``rows``: :class:`Row`, the shape every section's rows take, and
  :data:`MAX_DETAILS`.
* The sections, each making its rows (``<section>_rows(rep)``) and their
  sentences: ``headline`` (the first line, the panel's summary, the stance
  and wall time rows), ``compiles`` (compile time and phases, the frames
  traced, loaded or precompiled), ``caches`` (the compile caches),
  ``recompiles`` (recompiles, limits, budgets, dynamic shapes, causes),
  ``breaks`` (graph breaks, the session's to-do list), ``cudagraphs``,
  ``lookups`` (cache lookups and a compiled call's parts), ``memory``,
  ``calls`` (how the calls ended: eager fallbacks, refused recompiles, the
  account), ``compare`` (eager against compiled: peaks, speedup,
  break-even), ``shared`` (the files --trace and --timeline wrote).
* ``cell``: a cell's report, text and HTML: the sections' rows in order,
  what the brief report folds, the notes; the advice list.
* ``history``: the session's table; ``ranks``: a run across ranks (and the
  line a rank other than 0 shows, the session stance of every rank).
"""

from __future__ import annotations

from ..stance import stance_text
from ..text import cell_label, fmt_bytes, fmt_s, shorten
from .breaks import BreakEntry, BreakList, break_todo
from .caches import cache_line, cache_use_text, cache_verdict
from .calls import call_account_text
from .cell import advice_html, report_html, report_rows, report_text
from .cudagraphs import (
    cudagraph_frame_text,
    cudagraph_lines,
    cudagraph_skip_text,
    cudagraph_value,
)
from .headline import headline, headline_parts, summary_line
from .history import History, history_html, history_text
from .labels import (
    BUDGET_COLUMN,
    CACHE_COLUMNS,
    CACHE_LABELS,
    DOCS,
    HISTORY_COLUMNS,
    KERNEL_LABELS,
    MEMORY_COLUMN,
    MORE_TEXT,
    PACE,
    PHASE_LABELS,
    ROW_DOCS,
)
from .lookups import device_text, lookup_bound, lookup_method, parts_text
from .ranks import ranks_html, ranks_text
from .recompiles import budget_text, failure_text, limit_setting
from .rows import MAX_DETAILS, Row
from .sharing import share_lines
from .styles import WIDE, html_table, styled_table, text_table

# Every public name render.py had, for the modules, tests, benchmarks and
# notebooks that import them from here (the words' helpers of
# stance_magic.text among them).
__all__ = [
    "BUDGET_COLUMN",
    "CACHE_COLUMNS",
    "CACHE_LABELS",
    "DOCS",
    "HISTORY_COLUMNS",
    "KERNEL_LABELS",
    "MAX_DETAILS",
    "MEMORY_COLUMN",
    "MORE_TEXT",
    "PACE",
    "PHASE_LABELS",
    "ROW_DOCS",
    "WIDE",
    "BreakEntry",
    "BreakList",
    "History",
    "Row",
    "advice_html",
    "break_todo",
    "budget_text",
    "cache_line",
    "cache_use_text",
    "cache_verdict",
    "call_account_text",
    "cell_label",
    "cudagraph_frame_text",
    "cudagraph_lines",
    "cudagraph_skip_text",
    "cudagraph_value",
    "device_text",
    "failure_text",
    "fmt_bytes",
    "fmt_s",
    "headline",
    "headline_parts",
    "history_html",
    "history_text",
    "html_table",
    "limit_setting",
    "lookup_bound",
    "lookup_method",
    "parts_text",
    "ranks_html",
    "ranks_text",
    "report_html",
    "report_rows",
    "report_text",
    "share_lines",
    "shorten",
    "stance_text",
    "styled_table",
    "summary_line",
    "text_table",
]
