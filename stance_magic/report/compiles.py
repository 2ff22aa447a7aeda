"""A report's compiles: the phases a compile's time is split into and one
compile record of the cell (:class:`FrameCompile`, a frame or a lazy backward)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import probe
from .caches import CacheUse, NamedPlace

__all__ = ["PHASES", "FrameCompile"]

#: The exclusive phases a compile's time is split into, in order.
PHASES = probe.PHASES


@dataclass
class FrameCompile(NamedPlace):
    """One compile record of the cell: a frame (forward) or a lazy backward."""

    compile_id: str
    kind: str  # "frame" or "backward"
    name: str
    filename: str
    line: int | None
    seconds: float
    phases: dict[str, float]
    guard_count: int | None
    recompile_reason: str | None
    #: torch's fail_type and fail_reason when the compile failed
    failed: str | None = None
    #: the backend the graph was handed to (None: no graph reached a backend)
    backend: str | None = None
    #: a graph reached the backend (a frame without tensor operations has none)
    graph: bool = True
    #: compiled during a call that ran eagerly (eager_then_compile's first call)
    during_eager_call: bool = False
    #: the failure reached the cell as its error (else torch ran the frame eagerly)
    raised: bool = False
    #: compiled ahead of time: ``torch.compile(fn, fullgraph=True).aot_compile(...)``
    #: (no call ran it; its time is torch's span over the records it wrote)
    aot: bool = False
    #: the compile caches this compile consulted (AOTAutograd's, Inductor's
    #: FX graph cache): hits and misses as torch's record counts them
    caches: list[CacheUse] = field(default_factory=list)
    #: the file as a reader knows it (``In [3]``, ``site-packages/…``); the
    #: file name itself when empty
    file: str = ""

    @property
    def source(self) -> str:
        """``loaded`` (every graph from a compile cache), ``generated``,
        ``partly loaded``, or "" (no compile cache consulted: not Inductor)."""
        fx = next((c for c in self.caches if c.cache == "inductor"), None)
        aot = next((c for c in self.caches if c.cache == "aot_autograd"), None)
        if fx is None and aot is None:
            return ""
        if aot is not None and aot.state == "hit":
            return "loaded"
        if fx is None:
            return "generated"
        return {"hit": "loaded", "mixed": "partly loaded" if fx.hits else "generated"}.get(
            fx.state, "generated"
        )

    @property
    def saved_s(self) -> float | None:
        """What torch recorded for generating what this compile loaded."""
        aot = next((c for c in self.caches if c.cache == "aot_autograd" and c.state == "hit"), None)
        if aot is not None and aot.saved_s is not None:
            return aot.saved_s
        fx = next((c for c in self.caches if c.cache == "inductor"), None)
        return fx.saved_s if fx is not None else None
