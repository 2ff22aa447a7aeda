"""Two cells compared, in words: the headline (B vs A, the change in wall
time and its main cause), then only the rows that differ, each with A, B
and the change, and the functions whose code changed. The same content as
text and as HTML (every string escaped, inline styles)."""

from __future__ import annotations

import html
from typing import Any

from ..text import fmt_bytes, fmt_s, plural, shorten
from .recompiles import _cause_brief
from .styles import _HEADLINE, _TABLE, _TD, _TH, text_table

__all__ = ["diff_headline", "diff_html", "diff_text", "row_values"]

_CODE = "font-family:monospace;white-space:pre;font-size:11px;margin:2px 0 4px 8px"
_ADDED = "color:#1a6b3c"
_REMOVED = "color:#c62828"


def _value(v: Any, unit: str) -> str:
    if v is None or v == "":
        return "—"
    if unit == "s":
        return fmt_s(v)
    if unit == "bytes":
        return fmt_bytes(v)
    if unit == "ratio":
        return f"{v:.2f}×"
    if unit == "text":
        return shorten(str(v), 44)
    return f"{v:,}"


def _change(row: Any) -> str:
    c = row.change
    if c is None:
        return "changed"
    if row.unit == "s":
        text = ("+" if c > 0 else "") + fmt_s(c)
        if row.a:
            ratio = row.b / row.a
            text += f" ({ratio:.2f}×)" if ratio >= 0.1 else f" ({ratio:.2g}×)"
        return text
    if row.unit == "bytes":
        return fmt_bytes(c, signed=True)
    if row.unit == "ratio":
        return f"{c:+.2f}×"
    return f"{c:+,}"


def row_values(row: Any) -> tuple[str, str, str, str]:
    """A row as (name, A, B, change) in words."""
    return row.name, _value(row.a, row.unit), _value(row.b, row.unit), _change(row)


def _cause(d: Any) -> str:
    """The main cause of the difference, in a few words ("" for none)."""
    row = d.row
    parts = []
    st = row("stance")
    if st is not None:
        parts.append(f"stance {st.a} → {st.b}")
    err = row("error")
    if err is not None:
        if err.b:
            parts.append(f"failed ({str(err.b).split(':', 1)[0]})")
        else:
            parts.append(f"{d.a}'s error gone")
    rec = row("recompiles")
    if rec is not None and rec.change:
        text = plural(abs(rec.change), "recompile") + (" more" if rec.change > 0 else " fewer")
        briefs = list(dict.fromkeys(_cause_brief(c) for c in d.causes))
        if briefs and rec.change > 0:
            text += f" ({briefs[0]}{', …' if len(briefs) > 1 else ''})"
        parts.append(text)
    elif rec is not None:
        briefs = list(dict.fromkeys(_cause_brief(c) for c in d.causes))
        why = f" ({briefs[0]})" if briefs else ""
        parts.append(f"recompiled for another reason{why}")
    frames = row("frames traced")
    if frames is not None and not parts:
        new = [x[2:].split(" (")[0] for x in frames.details if x.startswith("+ ")]
        if new:
            parts.append(f"{', '.join(dict.fromkeys(new))} traced")
    br = row("graph breaks")
    if br is not None:
        parts.append(
            f"{plural(abs(br.change or 0), 'graph break')} "
            f"{'more' if (br.change or 0) > 0 else 'fewer'}"
            if br.change
            else "graph breaks moved"
        )
    settings = [r for r in d.rows if r.name.startswith("setting ")]
    if settings:
        first = settings[0]
        parts.append(f"{first.key.rsplit('.', 1)[-1]} {first.a} → {first.b}")
    if d.sources:
        parts.append(f"{', '.join(s.name for s in d.sources)} edited")
    if not parts:
        for key, word in (("compile_s", "compile time"), ("per_lookup_s", "cache lookups")):
            r = row(key)
            if r is not None:
                parts.append(f"{word} {_change(r)}")
                break
    return ", ".join(parts[:3])


def diff_headline(d: Any) -> str:
    """``In [9] vs In [7]: +2.03 s: f traced (…), 1 recompile more``."""
    head = f"{d.b} vs {d.a}"
    if d.same:
        return f"{head}: the same ({_wall(d)}, within noise)"
    cause = _cause(d)
    return f"{head}: {_wall(d)}" + (f": {cause}" if cause else "")


def _wall(d: Any) -> str:
    c = d.wall_change_s
    return ("+" if c > 0 else "") + fmt_s(c) + " wall"


def _source_lines(s: Any) -> list[str]:
    return [f"{s.name}: {s.a_where} → {s.b_where}", *(f"  {line}" for line in s.lines)]


def diff_text(d: Any) -> str:
    """The diff as text."""
    out = [diff_headline(d)]
    if d.rows:
        body = [list(row_values(row)) for row in d.rows]
        out.append(text_table(["", d.a, d.b, "change"], body, indent="  "))
        for row in d.rows:
            if row.details:
                out.append(f"  {row.name} (- only in {d.a}, + only in {d.b}):")
                out += [f"    {shorten(x, 110)}" for x in row.details]
    if d.sources:
        out.append("  code changed:")
        for s in d.sources:
            out += [f"    {line}" for line in _source_lines(s)]
    out.append(f"  noise: {d.noise}")
    return "\n".join(out)


def diff_html(d: Any) -> str:
    """The diff as HTML: the same content, every string escaped."""
    e = html.escape
    parts = [
        '<div class="sm-diff" style="text-align:left">',
        f'<div class="sm-headline" style="{_HEADLINE}">{e(diff_headline(d))}</div>',
    ]
    if d.rows:
        head = "".join(f'<th style="{_TH}">{e(x)}</th>' for x in ("", d.a, d.b, "change"))
        body = []
        for row in d.rows:
            cells = "".join(f'<td style="{_TD}">{e(x)}</td>' for x in row_values(row))
            body.append(f"<tr>{cells}</tr>")
            for x in row.details:
                colour = _ADDED if x.startswith("+ ") else _REMOVED if x.startswith("- ") else ""
                body.append(
                    f'<tr><td style="{_TD}"></td><td colspan=3 style="{_TD};{colour}">'
                    f"{e(x)}</td></tr>"
                )
        parts.append(
            f'<table class="sm-diff-rows" style="{_TABLE}"><tr>{head}</tr>{"".join(body)}</table>'
        )
    for s in d.sources:
        lines = []
        for line in s.lines:
            colour = _ADDED if line.startswith("+") else _REMOVED if line.startswith("-") else ""
            lines.append(f'<span style="{colour}">{e(line)}</span>' if colour else e(line))
        parts.append(
            f'<div style="font-size:12px">code changed: <b>{e(s.name)}</b> '
            f"{e(s.a_where)} → {e(s.b_where)}</div>"
            f'<div class="sm-diff-code" style="{_CODE}">' + "\n".join(lines) + "</div>"
        )
    parts.append(f'<div style="font-size:11px;color:#777">noise: {e(d.noise)}</div></div>')
    return "".join(parts)
