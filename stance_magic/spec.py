"""What to measure in one block, and how: the one description every front
end (the magics, :func:`stance_magic.measure`, ``--compare``, ``--sweep``, a
watched cell) hands the engine."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .stance import Stance

__all__ = ["MeasureSpec"]


@dataclass(frozen=True)
class MeasureSpec:
    """What to measure in one block, and how.

    Parameters
    ----------
    stance
        The stance the block runs under; None: the session stance, resolved
        when the block starts, and a stance the block's own code sets stays
        after it (a named one is given back when the block ends).
    source, label
        The block's code (a cell's source) and a name for it in views.
    execution_count
        The number the front end gave the cell (``In [7]``), when it knows it.
    memory
        Also measure the bytes torch allocates (``-m``).
    profile_lookups
        Time every cache lookup with torch's profiler (``-g``) instead of in
        situ.
    trace
        A directory for the block's structured trace (what ``TORCH_TRACE``
        writes), parsed by tlparse when it is installed (``--trace``).
    timeline
        A Chrome-trace/Perfetto JSON file of the block (``--timeline``).
    ranks
        ``"summary"`` or ``"full"``: gather the report across the ranks of
        the default ``torch.distributed`` process group when the block ends
        (``--ranks``, ``--ranks --full``); None: this process alone.
    watch
        A watched cell (``%stance watch on``): its report joins the history
        only when the cell used torch.compile.
    trace_functions
        Time Dynamo's tracing by function with torch's ``dynamo_profiler``
        (torch 2.13+; the report's "tracing by function"). Set by the
        outermost block of nested ones.
    """

    stance: Stance | None = None
    source: str = ""
    label: str | None = None
    execution_count: int | None = None
    memory: bool = False
    profile_lookups: bool = False
    trace: str | None = None
    timeline: str | None = None
    ranks: Literal["summary", "full"] | None = None
    watch: bool = False
    trace_functions: bool = True

    def check(self) -> None:
        """Refuse a trace directory or timeline file that cannot be written,
        or a ``ranks`` mode that does not exist, before the block runs (a
        ``ValueError`` with one line)."""
        if self.ranks is not None and self.ranks not in ("summary", "full"):
            raise ValueError(f"ranks must be 'summary' or 'full', not {self.ranks!r}")
        if self.trace is not None or self.timeline is not None:
            check_options(self.trace, self.timeline)


def check_options(
    trace: str | os.PathLike[str] | None, timeline: str | os.PathLike[str] | None
) -> None:
    """Refuse a trace directory or timeline file that cannot be written,
    before the cell runs (a ``ValueError`` with one line)."""
    if trace is not None:
        d = Path(trace).expanduser()
        if d.exists() and not d.is_dir():
            raise ValueError(f"--trace {trace}: not a directory")
        parent = d if d.exists() else _existing_parent(d)
        if not os.access(parent, os.W_OK):
            raise ValueError(f"--trace {trace}: cannot write in {parent}")
    if timeline is not None:
        from .paths import check_target

        try:
            check_target(timeline)
        except OSError as err:
            raise ValueError(f"--timeline {timeline}: {err.strerror or err}") from None


def _existing_parent(p: Path) -> Path:
    p = p.absolute()
    while not p.exists():
        p = p.parent
    return p
