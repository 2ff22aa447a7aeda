"""Two measured cells compared: :func:`diff_cells` makes a
:class:`~stance_magic.report.CellDiff` from two reports alone (and the cells'
code, where the front end knows it), and :func:`pick` finds the reports a
user names (``7``, ``In [7]``, ``-1``, a stance of the last ``--sweep``).

Every figure is read from the reports as they state them, never measured
again. Times are noise unless they differ beyond :data:`TIME_RATIO` *and*
:data:`TIME_MIN_S` (a cell run twice on this machine drifts within 1.25×,
and a change under a millisecond is no cause a user can act on); counts,
places, settings and code differ when they are not equal.
"""

from __future__ import annotations

import ast
import difflib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import probe
from ..report import PHASES, CellDiff, CellReport, DiffRow, SourceDiff
from ..text import cell_label, fmt_s

__all__ = [
    "LOOKUP_MIN_S",
    "LOOKUP_MIN_TIMED",
    "MEMORY_MIN_BYTES",
    "NOISE",
    "TIME_MIN_S",
    "TIME_RATIO",
    "DiffError",
    "diff_cells",
    "pick",
]

#: A time differs beyond noise when the larger is more than this many times
#: the smaller ...
TIME_RATIO = 1.25
#: ... and they are further apart than this (seconds; for a cell's times)
TIME_MIN_S = 1e-3
#: the same for a cache lookup's cost a call (a cell of one call times one
#: lookup: a few microseconds apart is noise) ...
LOOKUP_MIN_S = 5e-6
#: ... and compared only when each cell timed this many lookups (a cell of
#: a few calls times its first, cold lookups: 8 µs in one run, 15 in the next)
LOOKUP_MIN_TIMED = 8
#: memory peaks differ beyond this many bytes and 10 %
MEMORY_MIN_BYTES = 1 << 20
MEMORY_RATIO = 1.10
#: the rule in words (the diff states it)
NOISE = (
    f"times differ when one is over {TIME_RATIO}× the other and they are over "
    f"1 ms apart (a lookup's cost: 5 µs, with {LOOKUP_MIN_TIMED} lookups timed in each); "
    f"counts, places, settings and code "
    f"when they are not equal"
)
#: lines of a function's unified diff shown, at most
SOURCE_LINES = 24


class DiffError(ValueError):
    """A name that names no measured cell (the message lists what can be named)."""


# -- naming the cells ----------------------------------------------------------
def _parse_name(text: str) -> tuple[int, str | None] | None:
    """``7``, ``In [7]``, ``In[7]``, ``7:default``, ``In [7]:default`` as
    (7, the stance or None); None for another name."""
    number, _, stance = text.partition(":")
    number = number.strip()
    if number[:2].lower() == "in":
        inner = number[2:].strip()
        if not (inner.startswith("[") and inner.endswith("]")):
            return None
        number = inner[1:-1].strip()
    if not number.isdigit():
        return None
    stance = stance.strip()
    if ":" in text and not stance.isidentifier():
        return None
    return int(number), stance or None


def _nameable(history: Sequence[CellReport]) -> str:
    numbers = sorted({r.execution_count for r in history if r.execution_count})
    shown = ", ".join(str(n) for n in numbers[-8:])
    if len(numbers) > 8:
        shown = "…, " + shown
    sweep = _last_sweep(history)
    parts = []
    if numbers:
        parts.append(f"a cell's number ({shown})")
    parts.append(f"a position from the end (-1 to -{len(history)})")
    if sweep:
        parts.append("a stance of the last --sweep (" + ", ".join(r.stance for r in sweep) + ")")
    return "; ".join(parts)


def _last_sweep(history: Sequence[CellReport]) -> list[CellReport]:
    """The reports of the last ``--sweep`` run (one per stance), or []."""
    out: list[CellReport] = []
    for rep in reversed(history):
        if not (rep.label or "").startswith("sweep: "):
            if out:
                break
            continue
        if out and rep.execution_count != out[-1].execution_count:
            break
        out.append(rep)
    return out[::-1]


def _one(history: Sequence[CellReport], name: Any) -> CellReport:
    if isinstance(name, CellReport):
        return name
    if isinstance(name, bool):
        raise DiffError(f"{name!r} names no measured cell: name {_nameable(history)}")
    if isinstance(name, int):
        if name < 0:
            if -name > len(history):
                raise DiffError(
                    f"{name} is past the history's {len(history)} measured "
                    f"cell{'s' if len(history) != 1 else ''}: name {_nameable(history)}"
                )
            return history[name]
        return _numbered(history, name, None)
    text = str(name).strip()
    if text.startswith("-") and text[1:].isdigit():
        return _one(history, int(text))
    parsed = _parse_name(text)
    if parsed is not None:
        return _numbered(history, *parsed)
    sweep = [r for r in _last_sweep(history) if r.stance == text]
    if sweep:
        return sweep[0]
    raise DiffError(f"{text!r} names no measured cell: name {_nameable(history)}")


def _numbered(history: Sequence[CellReport], number: int, stance: str | None) -> CellReport:
    found = [r for r in history if r.execution_count == number]
    if stance is not None:
        found = [r for r in found if r.stance == stance]
    if not found:
        what = f"In [{number}]" + (f" under {stance}" if stance else "")
        raise DiffError(f"{what} is no measured cell: name {_nameable(history)}")
    if len(found) > 1 and stance is None:
        stances = ", ".join(f"{number}:{r.stance}" for r in found)
        raise DiffError(f"In [{number}] measured {len(found)} runs: name one ({stances})")
    return found[0]


def pick(
    history: Sequence[CellReport], a: Any = None, b: Any = None
) -> tuple[CellReport, CellReport]:
    """The two reports to compare: A and B as named; B alone: B against the
    measured cell before it; neither: the last two measured cells."""
    if a is None and b is not None:
        a, b = b, None
    if a is None:
        if len(history) < 2:
            raise DiffError(
                f"nothing to compare: {len(history)} measured cell"
                f"{'s' if len(history) != 1 else ''} so far (run two %%stance cells)"
            )
        return history[-2], history[-1]
    first = _one(history, a)
    if b is not None:
        return first, _one(history, b)
    before = [r for r in history if r.index and first.index and r.index < first.index]
    if not before:
        raise DiffError(
            f"{cell_label(first) or 'that cell'} has no measured cell before it: name two cells"
        )
    return before[-1], first


# -- the rows ------------------------------------------------------------------
def _times_differ(a: float | None, b: float | None, floor: float = TIME_MIN_S) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    lo, hi = sorted((abs(a), abs(b)))
    return hi - lo > floor and (lo == 0 or hi / lo > TIME_RATIO)


def _bytes_differ(a: int | None, b: int | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    lo, hi = sorted((a, b))
    return hi - lo > MEMORY_MIN_BYTES and (lo <= 0 or hi / lo > MEMORY_RATIO)


def _only(a: Counter[str], b: Counter[str]) -> list[str]:
    """The lines of what only one side holds (``+`` B's, ``-`` A's)."""
    return [f"- {k}" for k in (a - b).elements()] + [f"+ {k}" for k in (b - a).elements()]


def _strip_id(reason: str) -> str:
    """A guard failure's text without its cache entry (``0/1: ``)."""
    return probe.guard_entry(reason)[1]


def _recompile_keys(rep: CellReport) -> Counter[str]:
    return Counter(f"{r.where}: {_strip_id(r.reason)}" for r in rep.recompile_details)


def _break_keys(rep: CellReport) -> Counter[str]:
    out: Counter[str] = Counter()
    for g in rep.graph_break_details:
        # the user's line (a break inside library code: the line that led there)
        where = g.user_where if g.user_filename else g.where
        out[f"{g.summary} ({where})" if where else g.summary] += g.count
    return out


def _frame_keys(rep: CellReport) -> Counter[str]:
    return Counter(f.where for f in rep.frames if f.kind == "frame")


def _dynamic_keys(rep: CellReport) -> Counter[str]:
    return Counter(
        f"{d.where.split(' (')[0]}: {', '.join(d.inputs)}" for d in rep.dynamic_shapes if d.symbols
    )


#: (row name, summary column, unit): the counts compared one to one
_COUNTS = (
    ("compiles", "compiles", "count"),
    ("backward compiles", "backward_compiles", "count"),
    ("graphs", "graphs", "count"),
    ("failed compiles", "failed_compiles", "count"),
    ("cache hits", "cache_hits", "count"),
    ("cache misses", "cache_misses", "count"),
    ("calls run eagerly", "calls_eager", "count"),
    ("calls refused", "calls_refused", "count"),
    ("calls failed", "calls_failed", "count"),
    ("eager fallbacks (eager_on_recompile)", "eager_fallbacks", "count"),
    ("recompiles refused (fail_on_recompile)", "refused_recompiles", "count"),
    ("eager first calls (eager_then_compile)", "eager_first_calls", "count"),
    ("calls at the recompile limit", "limit_eager_calls", "count"),
)


def _listed(
    name: str,
    key: str,
    ka: Counter[str],
    kb: Counter[str],
    ra: Mapping[str, Any] | None = None,
    rb: Mapping[str, Any] | None = None,
) -> list[DiffRow]:
    """The row of a list (frames, recompiles, ...) when the two cells' lists
    differ: the counts (the summary rows' ``key`` where given, else the
    lists' lengths) and a line for each entry only one of them has."""
    if ka == kb:
        return []
    x = ra[key] if ra is not None else sum(ka.values())
    y = rb[key] if rb is not None else sum(kb.values())
    return [DiffRow(name, key, x, y, y - x, "count", _only(ka, kb))]


def _rows(a: CellReport, b: CellReport) -> list[DiffRow]:
    ra, rb = a.summary_row(), b.summary_row()
    rows: list[DiffRow] = []
    if a.stance_label != b.stance_label:
        rows.append(DiffRow("stance", "stance_label", a.stance_label, b.stance_label, unit="text"))
    if (a.error or "") != (b.error or ""):
        rows.append(DiffRow("error", "error", a.error or "", b.error or "", unit="text"))
    if _times_differ(a.wall_s, b.wall_s):
        rows.append(DiffRow("wall time", "wall_s", a.wall_s, b.wall_s, b.wall_s - a.wall_s, "s"))
    if _times_differ(a.compile_s, b.compile_s):
        rows.append(
            DiffRow(
                "compile time",
                "compile_s",
                a.compile_s,
                b.compile_s,
                b.compile_s - a.compile_s,
                "s",
            )
        )
        for p in PHASES:
            x, y = ra[f"{p}_s"], rb[f"{p}_s"]
            if _times_differ(x, y):
                rows.append(DiffRow(f"compile time: {p}", f"{p}_s", x, y, y - x, "s"))
    rows += _listed("frames traced", "", _frame_keys(a), _frame_keys(b))
    rows += _listed("recompiles", "recompiles", _recompile_keys(a), _recompile_keys(b), ra, rb)
    rows += _listed("graph breaks", "graph_breaks", _break_keys(a), _break_keys(b), ra, rb)
    for name, key, unit in _COUNTS:
        if ra[key] != rb[key]:
            rows.append(DiffRow(name, key, ra[key], rb[key], rb[key] - ra[key], unit))
    la, lb = a.lookups.per_lookup_s, b.lookups.per_lookup_s
    enough = min(a.lookups.timed, b.lookups.timed) >= LOOKUP_MIN_TIMED
    if la is not None and lb is not None and enough and _times_differ(la, lb, LOOKUP_MIN_S):
        rows.append(DiffRow("cache lookup a call", "per_lookup_s", la, lb, lb - la, "s"))
    pa, pb = a.peak_bytes, b.peak_bytes
    if pa is not None and pb is not None and _bytes_differ(pa, pb):
        rows.append(DiffRow("peak memory", "peak_bytes", pa, pb, pb - pa, "bytes"))
    sa = a.compare.speedup if a.compare is not None else None
    sb = b.compare.speedup if b.compare is not None else None
    if sa and sb and max(sa, sb) / min(sa, sb) > TIME_RATIO:
        rows.append(DiffRow("speedup over eager", "speedup", sa, sb, sb - sa, "ratio"))
    rows += _tracing_rows(a, b)
    rows += _listed("dynamic dimensions", "", _dynamic_keys(a), _dynamic_keys(b))
    rows += _setting_rows(a, b)
    return rows


#: functions whose tracing time changed, listed under the row at most
TRACING_SHOWN = 5


def _tracing_rows(a: CellReport, b: CellReport) -> list[DiffRow]:
    """The functions whose own tracing time changed most, where both cells
    have tracing by function (torch 2.13+) and a function's time differs
    beyond the noise rule (a function traced in one cell only: 0 in the other)."""
    ta, tb = a.tracing, b.tracing
    if not (ta.measured and tb.measured):
        return []
    fa = {(f.filename, f.line, f.name): f for f in ta.functions}
    fb = {(f.filename, f.line, f.name): f for f in tb.functions}
    changed = []
    for key in fa.keys() | fb.keys():
        x, y = fa.get(key), fb.get(key)
        sx, sy = (x.own_s if x else 0.0), (y.own_s if y else 0.0)
        if _times_differ(sx, sy):
            changed.append((abs(sy - sx), sx, sy, (y or x)))
    if not changed:
        return []
    changed.sort(key=lambda c: (-c[0], c[3].name))
    details = [
        f"{f.where}: {fmt_s(sx)} → {fmt_s(sy)} ({'+' if sy >= sx else '−'}{fmt_s(abs(sy - sx))})"
        + ("" if sx and sy else (" (traced in B only)" if sy else " (traced in A only)"))
        for _, sx, sy, f in changed[:TRACING_SHOWN]
    ]
    if len(changed) > TRACING_SHOWN:
        details.append(f"and {len(changed) - TRACING_SHOWN} more")
    return [
        DiffRow(
            "tracing by function",
            "traced_s",
            ta.traced_s,
            tb.traced_s,
            tb.traced_s - ta.traced_s,
            "s",
            details,
        )
    ]


def _setting_rows(a: CellReport, b: CellReport) -> list[DiffRow]:
    """The compile settings whose values differ (a setting left at its
    default reads as that default); none where a cell did not read them."""
    if a.settings is None or b.settings is None:
        return []
    out = []
    for name in sorted(set(a.settings) | set(b.settings)):
        x, y = a.settings.get(name), b.settings.get(name)
        va = x[0] if x is not None else (y[1] if y is not None else "")
        vb = y[0] if y is not None else (x[1] if x is not None else "")
        if va != vb:
            out.append(DiffRow(f"setting {name}", name, va, vb, unit="text"))
    return out


# -- the code ------------------------------------------------------------------
#: the notebook's function definitions: name -> [(cell number, source)], by number
Definitions = dict[str, list[tuple[int, str]]]


def _definitions(cells: Mapping[int, str]) -> Definitions:
    """Every ``def`` in the cells (each cell parsed once), by name; a cell
    that defines a name twice counts its last."""
    out: Definitions = {}
    for number in sorted(cells):
        source = cells[number]
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        last: dict[str, ast.AST] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name not in last or node.lineno > last[node.name].lineno:  # type: ignore[attr-defined]
                    last[node.name] = node
        for name, node in last.items():
            text = ast.get_source_segment(source, node, padded=True)
            if text is not None:
                out.setdefault(name, []).append((number, text))
    return out


def _defined_at(defs: Definitions, name: str, upto: int) -> tuple[int, str] | None:
    """The last definition of ``name`` in a cell numbered ``upto`` or before."""
    found = None
    for number, text in defs.get(name, ()):
        if number > upto:
            break
        found = (number, text)
    return found


def _function_names(rep: CellReport) -> list[str]:
    """The functions a report says took part in its compiles: each frame's
    own, and the globals its recompiles' failed guards name (functions
    Dynamo inlined: ``G['helper'].__code__``, redefined or gone)."""
    names = [f.name for f in rep.frames if f.kind == "frame"]
    names += [c.subject for c in rep.causes if c.kind == "redefined"]
    for r in rep.recompile_details:
        for text in (r.reason, *(g.reason for g in r.failures)):
            names += probe.guarded_globals(text)
    return list(dict.fromkeys(n for n in names if n.isidentifier()))


def _called(source: str) -> list[str]:
    """The names a function's code reads (the functions it may call)."""
    try:
        tree = ast.parse(source.strip())
    except SyntaxError:
        return []
    return [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def _reached(defs: Definitions, names: list[str], upto: int, depth: int = 3) -> list[str]:
    """``names`` and the notebook's functions their code names, ``depth``
    calls deep (what Dynamo traced into, as far as the cells' code says)."""
    out = list(dict.fromkeys(names))
    frontier = list(out)
    for _ in range(depth):
        found = []
        for name in frontier:
            got = _defined_at(defs, name, upto)
            for callee in _called(got[1]) if got is not None else ():
                if callee not in out and _defined_at(defs, callee, upto) is not None:
                    out.append(callee)
                    found.append(callee)
        frontier = found
    return out


def _sources(a: CellReport, b: CellReport, cells: Mapping[int, str] | None) -> list[SourceDiff]:
    if not cells or not a.execution_count or not b.execution_count:
        return []
    out = []
    defs = _definitions(cells)
    # B's compiled functions, the globals its failed guards name (a guard
    # made when A's compile inlined them) and the notebook's functions that
    # their code calls
    for name in _reached(defs, _function_names(b), b.execution_count):
        x = _defined_at(defs, name, a.execution_count)
        y = _defined_at(defs, name, b.execution_count)
        if x is None or y is None or x[1] == y[1]:
            continue
        lines = list(
            difflib.unified_diff(
                x[1].splitlines(), y[1].splitlines(), f"In [{x[0]}]", f"In [{y[0]}]", lineterm=""
            )
        )[2:]
        if len(lines) > SOURCE_LINES:
            lines = [*lines[:SOURCE_LINES], f"… {len(lines) - SOURCE_LINES} more lines"]
        out.append(SourceDiff(name, f"In [{x[0]}]", f"In [{y[0]}]", lines))
    return out


def diff_cells(
    a: CellReport,
    b: CellReport,
    cells: Mapping[int, str] | Callable[[], Mapping[int, str]] | None = None,
) -> CellDiff:
    """B against A, from the two reports. ``cells``: the code of the
    notebook's cells by number (or a function that reads it), for the
    functions whose source differs; None: no code compared."""
    rows = _rows(a, b)
    code = cells() if callable(cells) else cells
    sources = _sources(a, b, code)
    # B's recompile causes that A did not have (the headline's "why")
    seen = {_strip_id(c.guard) for c in a.causes}
    new_causes = [c for c in b.causes if _strip_id(c.guard) not in seen]
    return CellDiff(
        cell_label(a) or "A",
        cell_label(b) or "B",
        a.index,
        b.index,
        b.wall_s - a.wall_s,
        not rows and not sources,
        NOISE,
        rows,
        sources,
        new_causes,
    )
