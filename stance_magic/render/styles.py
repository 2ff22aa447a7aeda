"""How the views look: the inline CSS of every HTML view and the small table
helpers the report, the history, the ranks and the graph-break list share
(an HTML table of escaped cells, a text table padded to its columns).

Inline styles only: JupyterLab strips a ``<style>`` element from the outputs
of an untrusted notebook (what Binder and a fresh clone show first), and keeps
style attributes. Colours that read on light and dark themes alike.
"""

from __future__ import annotations

import html
from typing import Sequence

_TABLE = "border-collapse:collapse;font-size:12px;margin:2px 0;width:auto;table-layout:auto"
_CELL = (
    "padding:2px 8px;text-align:left;vertical-align:top;"
    "border-bottom:1px solid rgba(128,128,128,0.25)"
)
_TH = f"{_CELL};font-weight:600;white-space:nowrap"
_TD = f"{_CELL};white-space:normal"
_TH_WRAP = f"{_CELL};font-weight:600;white-space:normal"
_UL = "margin:0;padding-left:16px;text-align:left"
_LI = "text-align:left"
_CAPTION = "text-align:left;font-weight:600;padding:2px 0;caption-side:top"
_HINT = "text-align:left;padding:1px 8px;font-size:12px;color:#1a6b3c"
_HEADLINE = "text-align:left;font-weight:600;font-size:12px;padding:2px 0"
_ERR = "color:#c62828"
_SUMMARY = "cursor:pointer;font-size:12px;color:#777;text-align:left"
_DOC_LINK = "font-weight:400;font-size:10px;color:#888;text-decoration:none;vertical-align:super"

#: Columns from which a table is set tighter (smaller type, less padding).
WIDE = 9


def text_table(head: Sequence[str], body: Sequence[Sequence[str]], indent: str = "") -> str:
    """Columns padded to their widest cell, a rule under the header."""
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]
    return "\n".join(indent + line for line in out)


def _td(text: str, shown: str | None = None, extra: str = "", columns: int = 0) -> str:
    """A table cell, inline-styled: a short one stays on one line, a long one
    wraps (so a table fits 1,000 px). ``shown``: its HTML when not ``text``
    escaped; ``columns``: the table's (a wide one is set tighter)."""
    wrap = "white-space:nowrap" if len(text) <= 22 else "white-space:normal;min-width:7em"
    body = html.escape(text) if shown is None else shown
    if shown is None and len(text) > 12 and "_" in text:
        # a long name (aot_eager_then_compile) may break after an underscore
        wrap, body = "white-space:normal", body.replace("_", "_<wbr>")
    return f'<td style="{_CELL};{wrap}{extra}{_tight(columns)}">{body}</td>'


def styled_table(
    head: Sequence[str], rows: Sequence[str], caption: str = "", cls: str = "sm-table"
) -> str:
    """An inline-styled table of ``rows`` (``<tr>`` … ``</tr>`` each) under
    ``head``, that keeps its layout in an untrusted notebook; a table of many
    columns is set tighter, its headers wrapping at a slash, so it fits 1,000 px."""
    e = html.escape
    cap = f'<caption style="{_CAPTION}">{e(caption)}</caption>' if caption else ""
    tight = _tight(len(head))
    th = "".join(f'<th style="{_TH_WRAP}{tight}">{e(h).replace("/", "/<wbr>")}</th>' for h in head)
    return (
        f'<div style="overflow-x:auto;text-align:left"><table class="sm-report {cls}" '
        f'style="{_TABLE}{tight}">{cap}<tr>{th}</tr>{"".join(rows)}</table></div>'
    )


def _tight(columns: int) -> str:
    """The style that sets a table of ``columns`` tighter ("" for a narrow one;
    the last declaration wins)."""
    return ";font-size:11px;padding:2px 3px" if columns >= WIDE else ""


def html_table(head: Sequence[str], body: Sequence[Sequence[str]], caption: str = "") -> str:
    """An escaped HTML table with the report style."""
    rows = ["<tr>" + "".join(_td(c, columns=len(head)) for c in r) + "</tr>" for r in body]
    return styled_table(head, rows, caption)
