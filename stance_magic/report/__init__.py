"""The per-cell report: what torch.compile did in one measured block, as plain data.

:class:`CellReport` holds numbers, names and places; it is made whole, once,
by :mod:`stance_magic.builder` from a closed measuring window and never written
to afterwards. Words live in :mod:`stance_magic.render` (a report's ``__str__``
and ``_repr_html_`` hand it over), charts in :mod:`stance_magic.plots`.

Nested parts group what belongs together: ``rep.lookups`` (Dynamo's cache
lookups and what they cost), ``rep.compile_caches`` (the AOTAutograd and FX
graph caches), ``rep.shared`` (a trace and a timeline written for the cell),
``rep.compare`` (``--compare``) and ``rep.ranks`` (``--ranks`` on rank 0).

One module per section of the report (import every name from here):

* ``cell``: :class:`CellReport`, the whole report, and what is derived from it
* ``compiles``: :data:`PHASES` and :class:`FrameCompile` (the compiles)
* ``lookups``: :class:`Lookups`, :class:`LookupTarget`, :class:`CallParts`
  (with :data:`GPU_BOUND` and :data:`HOST_BOUND`) and :class:`CallAccount`
  (the cache lookups and the calls)
* ``caches``: :class:`CacheUse`, :class:`CompileCaches`, :class:`ColdCompile`,
  :class:`PrecompiledFrame`, :class:`LoadedFunction` and :class:`Shared` (the
  compile caches, precompiled and loaded code, the files written)
* ``recompiles``: :class:`Recompile`, :class:`GuardFailure`,
  :class:`RecompileLimit`, :class:`Budget` and :class:`DynamicShapes`
* ``breaks``: :class:`GraphBreak`
* ``cudagraphs``: :class:`CudaGraphs`, :class:`CudaGraphFrame` and
  :class:`CudaGraphSkip`
* ``compare``: :class:`Comparison` (``--compare``) and :class:`Gathered`
  (``--ranks``)
* ``diff``: :class:`CellDiff`, :class:`DiffRow` and :class:`SourceDiff`
  (two cells compared, ``%stance diff``)
* ``tracing``: :class:`Tracing`, :class:`TracedFunction` and
  :class:`TracedModule` (Dynamo's tracing time by function, torch 2.13+)
* ``summary_row``: the export row's columns made from the parts
* ``deprecated``: the names of earlier releases, read with a warning
"""

from __future__ import annotations

from . import compiles
from .breaks import GraphBreak
from .caches import CacheUse, CompileCaches, LoadedFunction, PrecompiledFrame, Shared
from .caches import ColdCompile as ColdCompile
from .cell import CellReport
from .compare import Comparison, Gathered
from .compiles import FrameCompile
from .cudagraphs import CudaGraphFrame, CudaGraphs, CudaGraphSkip
from .diff import CellDiff, DiffRow, SourceDiff
from .lookups import GPU_BOUND as GPU_BOUND
from .lookups import HOST_BOUND as HOST_BOUND
from .lookups import CallAccount, CallParts, Lookups, LookupTarget
from .recompiles import Budget, DynamicShapes, GuardFailure, Recompile, RecompileLimit
from .tracing import TracedFunction, TracedModule, Tracing

# PHASES is bound here as well (the API page documents a module's own data only)
#: The exclusive phases a compile's time is split into, in order.
PHASES = compiles.PHASES

# The report's dataclasses, as documented on this module's page
# (ColdCompile, GPU_BOUND and HOST_BOUND are handed on without being listed).
__all__ = [
    "PHASES",
    "Budget",
    "CacheUse",
    "CallAccount",
    "CallParts",
    "CellDiff",
    "CellReport",
    "Comparison",
    "CompileCaches",
    "CudaGraphFrame",
    "CudaGraphSkip",
    "CudaGraphs",
    "DiffRow",
    "DynamicShapes",
    "FrameCompile",
    "Gathered",
    "GraphBreak",
    "GuardFailure",
    "LoadedFunction",
    "LookupTarget",
    "Lookups",
    "PrecompiledFrame",
    "Recompile",
    "RecompileLimit",
    "Shared",
    "SourceDiff",
    "TracedFunction",
    "TracedModule",
    "Tracing",
]
