"""A report's CUDA graphs: recorded, replayed, recorded again and skipped
(:class:`CudaGraphs`), per compiled frame and per reason for a skip."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..place import holds_places, worded

__all__ = ["CudaGraphFrame", "CudaGraphSkip", "CudaGraphs"]


@holds_places
@dataclass(frozen=True)
class CudaGraphSkip:
    """Graphs torch ran without CUDA graphs for one reason (see
    :mod:`stance_magic.probe.cudagraphs`)."""

    #: torch's reason, its first line (``skipping cudagraphs due to mutated
    #: inputs (1 instances)``; "" when torch gave none)
    reason: str
    count: int = 1
    #: the compile it came from (``0/0``; "" at run time) and that compile's
    #: frame (a :class:`~stance_magic.place.Place` read as ``f (In [3], line 2)``)
    compile_id: str = ""
    frame: str = field(default="", metadata=worded("named"))
    #: the user's line torch found the cause at (a place read as ``In [3],
    #: line 2``) and its source
    where: str = field(default="", metadata=worded("where"))
    source: str = ""
    #: the graph's devices, where torch skipped without a word (``cpu``)
    devices: list[str] = field(default_factory=list)
    #: torch logged the skip (False: it only counted it)
    logged: bool = True


@holds_places
@dataclass(frozen=True)
class CudaGraphFrame:
    """The CUDA graphs torch recorded in the cell for one compiled frame
    (its forward, backward or inference graphs together)."""

    #: the frame as the compiles row names it: a
    #: :class:`~stance_magic.place.Place` read as ``f (In [2], line 1)``
    #: (``f (compile 0/1)`` where no compile of the cell names it)
    frame: str = field(metadata=worded("named"))
    #: the compile ids whose graphs were recorded, in order
    compile_ids: list[str] = field(default_factory=list)
    recorded: int = 0
    #: of those: recorded again because the batch size (an input size)
    #: changed: for a new size of a graph with dynamic shapes (torch records
    #: one graph per size), or after a recompile for a size change
    for_new_sizes: int = 0
    #: of those: recorded again at the same place because torch could not
    #: replay the graph it had (its invariant check failed), and why
    rerecorded: int = 0
    why: list[str] = field(default_factory=list)
    #: the integer inputs (sizes) of each graph recorded, where it had any
    sizes: list[list[int]] = field(default_factory=list)


@holds_places
@dataclass(frozen=True)
class CudaGraphs:
    """CUDA graphs in the cell (``mode="reduce-overhead"``, the
    ``cudagraphs`` backend): recorded, replayed, recorded again and
    skipped, as torch's CUDA-graph trees did them."""

    recorded: int = 0
    replayed: int = 0
    #: warm-up runs (torch runs a graph eagerly before recording it)
    warmups: int = 0
    #: recordings beyond a frame's first: for new sizes, or re-records
    for_new_sizes: int = 0
    rerecorded: int = 0
    #: graphs run without CUDA graphs, with torch's reasons (grouped)
    skipped: int = 0
    skips: list[CudaGraphSkip] = field(default_factory=list)
    #: per compiled frame that recorded graphs
    frames: list[CudaGraphFrame] = field(default_factory=list)
    #: frames torch warned could not leave their warm-up (eager) runs for
    #: replays: outputs of an earlier call still wait for their backward
    #: (places read as ``f (In [2], line 1)``, or ``f (compile 0/1)``)
    pending_backward: list[str] = field(default_factory=list, metadata=worded("named"))
    #: the cell raised torch's error for reading an output of an earlier
    #: replay that a later replay overwrote; where torch says that output
    #: was made (a place read as ``In [3], line 2 `y = x @ x```), when its
    #: text says
    overwritten_output: bool = False
    overwritten_made_at: str = field(default="", metadata=worded("with_source"))

    @property
    def empty(self) -> bool:
        return not (
            self.recorded
            or self.replayed
            or self.warmups
            or self.skipped
            or self.pending_backward
            or self.overwritten_output
        )
