"""A report's recompiles: each recompile and the guards that failed, the
frames at torch's recompile limit, each frame's entries against that limit
(:class:`Budget`) and each graph's dynamic shapes."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..place import holds_places, worded

__all__ = ["Budget", "DynamicShapes", "GuardFailure", "Recompile", "RecompileLimit"]


@dataclass
class GuardFailure:
    """The guard that failed on one cache entry when torch looked for a match."""

    #: torch's text, with the entry's compile id first (``0/1: n == 2``)
    reason: str
    #: the user's line the guard came from, as torch points at it
    guard_source: str = ""

    @property
    def entry(self) -> str:
        """The compile id of the entry the guard belongs to (``0/1``)."""
        head = self.reason.split(":", 1)[0]
        return head if "/" in head else ""


@holds_places
@dataclass
class Recompile:
    """One recompile: torch's reason, where the frame is, and the guard's source.

    ``where``, ``called_from`` and ``stack`` hold places
    (:class:`~stance_magic.place.Place`) and read as their words (see
    :func:`stance_magic.place.of` for the places)."""

    reason: str
    #: the frame: ``f (In [3], line 2)``
    where: str = field(metadata=worded("named"))
    compile_id: str
    #: the user's line the failed guard came from, as torch points at it
    guard_source: str = ""
    #: every cache entry's failed guard (torch keeps only the first in its
    #: record's ``recompile_reason``)
    failures: list[GuardFailure] = field(default_factory=list)
    #: the user's line that made the recompiling call (``In [3], line 2``;
    #: ``In [1], line 2 in helper, from In [3], line 2`` through a function),
    #: read from the stack when torch compiled ("" where none was found);
    #: it holds that stack's places
    called_from: str = field(default="", metadata=worded("called_from"))
    #: every user frame of that call, innermost first (``In [1], line 2 in
    #: helper``), torch's and the notebook machinery's frames left out
    stack: list[str] = field(default_factory=list, metadata=worded("frame"))


@holds_places
@dataclass
class RecompileLimit:
    """A frame that reached torch's recompile limit: torch stops compiling
    it and runs every call that no cache entry matches eagerly."""

    #: the frame, a :class:`~stance_magic.place.Place` read as its words:
    #: ``f (In [3], line 2)`` (a frame with no file by its name alone)
    where: str = field(metadata=worded("label"))
    #: torch's config name, as the installed torch spells it
    config: str
    limit: int | None
    #: the attempt torch refused (its record), when it happened in this cell
    compile_id: str | None
    #: calls of this cell that ran eagerly because of the limit
    eager_calls: int = 0
    #: the guards that failed on the attempt that hit the limit
    failures: list[GuardFailure] = field(default_factory=list)
    #: torch._dynamo.config.automatic_dynamic_shapes when the report was made
    automatic_dynamic: bool | None = None
    #: ``limit`` is the frame's torch.compile call's own ``recompile_limit=``
    #: (torch._dynamo.config's does not apply to it)
    per_call: bool = False

    @property
    def setting(self) -> str:
        """What sets the limit, in the report's one wording of it
        (:func:`stance_magic.render.limit_setting`):
        ``torch._dynamo.config.recompile_limit``, or ``recompile_limit=8 of
        its torch.compile`` for the limit of the frame's own call."""
        from ..render import limit_setting

        return limit_setting(self)


@holds_places
@dataclass
class Budget:
    """A frame's cache entries against the recompile limit, after the cell."""

    #: the frame, a :class:`~stance_magic.place.Place` read as its words:
    #: ``f (In [3], line 2)`` (a frame with no file by its name alone)
    where: str = field(metadata=worded("label"))
    entries: int
    limit: int | None
    config: str
    #: ``limit`` is the frame's torch.compile call's own ``recompile_limit=``
    per_call: bool = False

    @property
    def left(self) -> int | None:
        """Recompiles left before torch stops compiling the frame."""
        return None if self.limit is None else max(self.limit - self.entries, 0)

    @property
    def near(self) -> bool:
        """One entry left (or none): the next recompile is the last, or refused."""
        return self.left is not None and self.left <= 1

    @property
    def used(self) -> str:
        """``7/8``: entries of the limit."""
        return f"{self.entries}/{self.limit if self.limit is not None else '?'}"


@holds_places
@dataclass
class DynamicShapes:
    """One compiled graph's inputs: which sizes are symbols, why, and which the
    code specialized (names as torch gave them: ``s77``)."""

    compile_id: str
    #: the graph's frame, a :class:`~stance_magic.place.Place` read as its
    #: words (``f (In [3], line 2)``; "" when unknown)
    where: str = field(metadata=worded("named"))
    #: ``x: [s77, 128]``
    inputs: list[str] = field(default_factory=list)
    #: ``s77 = x.size()[0]: mark_dynamic``
    symbols: list[str] = field(default_factory=list)
    #: ``s77 = x.size()[0] → 8 by Eq(s77, 8) at `x.view(8, -1)` (…)``
    specialized: list[str] = field(default_factory=list)

    @property
    def dynamic(self) -> bool:
        return bool(self.symbols or self.specialized)
