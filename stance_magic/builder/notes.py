"""The report's notes: how the window ended or what it could not see, in a
line each (a stance the cell set, a reset, the counters fallback for graph
breaks, a dimension marked dynamic that the code specialized, memory's and
the profiler's own notes)."""

from __future__ import annotations

from collections.abc import Sequence

from .. import probe
from ..text import fmt_s, plural
from .closed import Closed


def _notes(
    closed: Closed, figures: Sequence[probe.MemoryFigure], error: BaseException | None
) -> list[str]:
    window = closed.window
    notes = []
    block = closed.stance.name
    own = sorted(s for s in window.call_stances if s and s != block)
    if own:
        notes.append(
            f"the cell's own code set a stance: calls ran under {' and '.join(own)} too "
            "(each call counts under the stance in force when it was made)"
        )
    if window.reset_seen:
        notes.append(
            "torch.compiler.reset() ran in this cell: the figures cover compiles before "
            "and after it (torch restarts compile ids at 0/0)"
        )
    if window.break_source == "counters":
        notes.append(
            "graph breaks counted from torch's counters (this torch has no graph_breaks "
            "log artifact): some kinds of break are missed"
        )
    if error is not None and type(error).__name__ == "ConstraintViolationError":
        notes.append(
            "a dimension marked dynamic (mark_dynamic) was specialized by the code, so "
            f"torch refused to compile: {probe.constraint_detail(str(error))}"
        )
    busy = _busy_note(closed)
    if busy:
        notes.append(busy)
    notes.extend(fig.note for fig in figures if fig.note)
    if closed.profiler_error:
        notes.append(closed.profiler_error)
    notes.extend(closed.notes)
    return notes


#: The busy note's rule (a busy machine, or another thread of the process
#: holding Python's lock): spans waited for the CPU (see ``probe.WAITED_S``)
#: and that changed the reading: the time the waited lookups waited is at
#: least this share of the timed lookups' own (counted as timed, it would have
#: moved the lookup figure as much), or ...
BUSY_WAITED_SHARE = 0.1
#: ... at least this share of the lookups timed, or of the calls timed whole,
#: waited (the figures then stand on the rest). A few calls off the CPU among
#: many change neither: no note.
BUSY_SPANS_SHARE = 0.25
#: (and at least this many: one call's parts missing of a few changes no median)
BUSY_MIN = 2


def _busy_note(closed: Closed) -> str | None:
    """Where timed spans waited for the CPU (a busy machine: see
    ``probe.WAITED_S``) enough to change the reading (see
    :data:`BUSY_WAITED_SHARE`), what the figures count, in a line; else None."""
    window = closed.window
    if not (window.waited or window.waited_calls):
        return None
    timed_s = sum(t.seconds for t in window.targets)
    parts = sum(len(t.parts) for t in window.targets)
    moved = window.waited and window.waited_s >= BUSY_WAITED_SHARE * timed_s
    lookups = window.waited >= max(
        BUSY_MIN, BUSY_SPANS_SHARE * (window.timed_lookups + window.waited)
    )
    calls = window.waited_calls >= max(BUSY_MIN, BUSY_SPANS_SHARE * (parts + window.waited_calls))
    if not (moved or lookups or calls):
        return None
    spans = []
    if window.waited:
        spans.append(plural(window.waited, "timed lookup"))
    if window.waited_calls:
        spans.append(plural(window.waited_calls, "timed call"))
    waited = f" ({fmt_s(window.waited_s)} in all)" if window.waited else ""
    return (
        f"{' and '.join(spans)} waited off the CPU{waited}: another process, or another "
        "thread of this one, ran; they are counted, not timed (the other timed spans stand "
        "for them)"
    )
