"""Small text helpers every view shares: durations, bytes, plurals, labels,
sets of ranks.

Places in code are worded by :mod:`stance_magic.place`.

A leaf module: it imports nothing from stance_magic, so the report, the
views (render, plots, the panel) and the advice can all use it
without importing each other.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

__all__ = [
    "Shown",
    "cell_label",
    "first_code_line",
    "fmt_bytes",
    "fmt_s",
    "plural",
    "rank_groups",
    "rank_groups_text",
    "rank_set",
    "shorten",
]


def fmt_s(s: float | None) -> str:
    """Seconds, readable: 1.23 s, 45.6 ms, 789 µs.

    Examples
    --------
    >>> fmt_s(0.0456), fmt_s(None)
    ('45.6 ms', 'n/a')
    """
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
    """Bytes, readable (decimal units): 64.0 MB, 812 kB, 0 B.

    Examples
    --------
    >>> fmt_bytes(64e6), fmt_bytes(-812e3, signed=True)
    ('64.0 MB', '−812.0 kB')
    """
    if n is None:
        return "n/a"
    sign = ("+" if n > 0 else "−" if n < 0 else "") if signed else ("−" if n < 0 else "")
    a = abs(n)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if a >= scale:
            return f"{sign}{a / scale:.1f} {unit}"
    return f"{sign}{a:.0f} B"


def plural(k: int, word: str) -> str:
    """``1 lookup``, ``3 lookups``.

    Examples
    --------
    >>> plural(1, "graph"), plural(2, "graph")
    ('1 graph', '2 graphs')
    """
    return f"{k} {word}{'' if k == 1 else 's'}"


def shorten(text: str, width: int = 60) -> str:
    """One line of at most ``width`` characters (full text stays in the export)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def rank_set(ranks: Iterable[int]) -> str:
    """``rank 3`` / ``ranks 0-2, 5``: consecutive ranks as ranges.

    Examples
    --------
    >>> rank_set([3]), rank_set([0, 1, 2, 5])
    ('rank 3', 'ranks 0-2, 5')
    """
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


def rank_groups(pairs: Iterable[tuple[int, Any]]) -> list[tuple[Any, list[int]]]:
    """``(rank, value)`` pairs as the ranks of each value; the largest group
    first (ties: the group with the lowest rank), so the others read as the
    odd ones out. The report's flags across ranks and the line about every
    rank's session stance group ranks alike."""
    groups: dict[Any, list[int]] = {}
    for rank, value in pairs:
        groups.setdefault(value, []).append(rank)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))


def rank_groups_text(groups: Sequence[tuple[Any, list[int]]], fmt: Callable[[Any], str]) -> str:
    """``default on ranks 0-2; force_eager on rank 3``: each group's value
    (worded by ``fmt``) and its ranks."""
    return "; ".join(f"{fmt(value)} on {rank_set(ranks)}" for value, ranks in groups)


def first_code_line(source: str, width: int = 30) -> str:
    """The first line of code of a cell (comments skipped), cut to ``width``."""
    for line in source.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return line if len(line) <= width else line[: width - 1] + "…"
    return ""


def cell_label(rep: Any) -> str:
    """How reports, charts and the panel name a measured cell: IPython's
    ``In [7]`` when known, else its place in the history (``cell 3``)."""
    number = getattr(rep, "execution_count", None)
    if number:
        return f"In [{number}]"
    return f"cell {rep.index}" if getattr(rep, "index", 0) else ""


class Shown:
    """What a shown result (a report, a diff, a gathered report) gives a
    front end, from its own ``text()`` and ``html()``: ``str()``, Jupyter's
    ``_repr_html_`` and IPython's pretty form."""

    __slots__ = ()

    def text(self) -> str:
        raise NotImplementedError

    def html(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))
