"""The session stance across ranks: every rank's, gathered to rank 0
(``%stance [STANCE] --ranks``; in a torchrun script, after each rank's
:func:`stance_magic.set_session_stance`). Worded by
:func:`stance_magic.render.ranks.stances_line`."""

from __future__ import annotations

from .. import probe

__all__ = ["session_stances"]


def session_stances(stance: object) -> list[str] | None:
    """Every rank's session stance, on rank 0 (a collective; None elsewhere).

    ``stance`` is this rank's. ``%stance NAME --ranks`` sets the stance and
    then calls this, so that rank 0 can say whether all ranks agree.
    """
    rank, world = probe.rank_and_world()
    return probe.gather_to_rank0(str(stance), rank, world)
