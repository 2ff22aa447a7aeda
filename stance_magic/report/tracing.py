"""A report's tracing by function: where Dynamo's tracing time went, by the
user's function and ``nn.Module`` (torch's ``dynamo_profiler``, 2.13+), and
each function's whole compile cost (its tracing, plus the backend's compile
of the frames that start there)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .caches import NamedPlace

__all__ = [
    "TRACING_MEASURED",
    "TRACING_OFF",
    "TRACING_UNAVAILABLE",
    "TracedFunction",
    "TracedModule",
    "Tracing",
]

#: :attr:`Tracing.state`: torch's profiler timed the cell's traces
TRACING_MEASURED = "measured"
#: the profiler was turned off for the cell (``trace_functions=False``)
TRACING_OFF = "off"
#: this torch has no ``dynamo_profiler`` (before 2.13)
TRACING_UNAVAILABLE = "unavailable"


@dataclass
class TracedFunction(NamedPlace):
    """One function Dynamo traced in the cell, its traces added up (as
    pstats adds a function's calls up)."""

    #: the qualified name (``GPT2Attention.forward``; the plain name on Python 3.10)
    name: str
    filename: str
    line: int | None
    #: inclusive seconds: the function and all it called, over its
    #: non-recursive traces (pstats' ``cumtime``)
    cumulative_s: float
    #: exclusive seconds: without what it called (pstats' ``tottime``)
    own_s: float
    #: times Dynamo traced it (every layer's attention is one trace each)
    traced: int
    #: bytes of its bytecode (torch's count: compare tracing cost with size)
    bytecode: int
    #: the class whose ``forward`` it is (None: not an nn.Module's forward)
    module: str | None = None
    #: the attributes that module was called as, under the compiled frame's
    #: module (``h[0].attn``; at most :data:`PATHS_KEPT`), and how many in all
    paths: list[str] = field(default_factory=list)
    path_count: int = 0
    #: compiled frames that start at this function, and the seconds the
    #: backend took for them (AOTAutograd, the backend, code generation)
    frames: int = 0
    compile_s: float = 0.0
    file: str = ""

    @property
    def total_s(self) -> float:
        """Tracing plus the backend's compile of the frames that start here."""
        return self.cumulative_s + self.compile_s


@dataclass
class TracedModule:
    """The ``forward`` traces of one ``nn.Module`` class, added up."""

    name: str
    cumulative_s: float
    own_s: float
    traced: int


@dataclass
class Tracing:
    """Dynamo's tracing time of the cell by function."""

    #: :data:`TRACING_MEASURED`, :data:`TRACING_OFF` or :data:`TRACING_UNAVAILABLE`;
    #: "" for a cell that traced nothing
    state: str = ""
    #: every function traced, most inclusive time first
    functions: list[TracedFunction] = field(default_factory=list)
    #: the nn.Module classes whose forward was traced, most inclusive time first
    modules: list[TracedModule] = field(default_factory=list)
    #: seconds the profiler timed: each compiled frame's trace, inclusive.
    #: The functions' ``own_s`` add up to it, but where an inlined call
    #: failed and Dynamo went on (its own time is then its caller's, and
    #: the calls it finished count as well): they never pass ``dynamo_s``
    traced_s: float = 0.0
    #: the cell's Dynamo time as torch's records give it (the ``dynamo``
    #: compile phase: tracing, guards, bytecode), which holds ``traced_s``
    dynamo_s: float = 0.0
    #: frames traced (compile records with timings)
    frames: int = 0
    #: torch.compiler.reset() ran in the cell before any trace was timed (it
    #: takes out the callback that turns the profiler on until the next cell)
    reset_seen: bool = False

    @property
    def measured(self) -> bool:
        return self.state == TRACING_MEASURED and bool(self.functions)

    def share(self, seconds: float) -> float | None:
        """``seconds`` as a share of the cell's Dynamo time (None: none)."""
        return seconds / self.dynamo_s if self.dynamo_s > 0 else None

    def top(self, n: int = 5) -> list[TracedFunction]:
        """The ``n`` functions of most own (exclusive) tracing time: where
        the seconds were spent, each counted once."""
        return sorted(self.functions, key=lambda f: (-f.own_s, f.name))[:n]

    def compiled_frames(self) -> list[TracedFunction]:
        """The functions compiled frames start at, most tracing plus compiling first."""
        return sorted((f for f in self.functions if f.frames), key=lambda f: -f.total_s)


#: module paths kept per function
PATHS_KEPT = 4
