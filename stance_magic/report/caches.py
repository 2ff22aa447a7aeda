"""A report's compile caches: what one compile found in a cache
(:class:`CacheUse`), where the cell's compile time came from
(:class:`CompileCaches`, with the cold cell that generated what it loaded),
Dynamo's precompiled frames and loaded compiled functions, and the files
``--trace`` and ``--timeline`` wrote (:class:`Shared`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..place import Place, holds_places, worded

__all__ = [
    "CacheUse",
    "ColdCompile",
    "CompileCaches",
    "LoadedFunction",
    "PrecompiledFrame",
    "Shared",
]


class NamedPlace:
    """The place of a record named by a function and its file (its fields
    ``name``, ``filename``, ``line`` and ``file``, the file as a reader
    knows it): :attr:`at` and its words, :attr:`where`."""

    __slots__ = ()
    name: str
    filename: str
    line: int | None
    file: str

    @property
    def at(self) -> Place:
        """The place (see :mod:`stance_magic.place`)."""
        return Place(self.name, self.file or self.filename, self.line)

    @property
    def where(self) -> str:
        """The text form: ``f (In [3], line 2)``, ``f (?)`` for no file."""
        return self.at.named


@dataclass
class CacheUse:
    """What one compile found in one compile cache (AOTAutograd's, or
    Inductor's FX graph cache)."""

    cache: str  # "aot_autograd" or "inductor"
    #: as torch's CompilationMetrics record counts them
    hits: int = 0
    misses: int = 0
    #: as torch logged them (a bypass is not in the record)
    bypasses: int = 0
    #: torch compiled with this cache switched off
    disabled: bool = False
    keys: list[str] = field(default_factory=list)
    #: the hits: what torch recorded for generating what they loaded
    saved_s: float | None = None
    #: torch's reason for each bypass (its first line)
    reasons: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        """``hit``, ``miss``, ``bypass``, ``mixed`` or ``off``."""
        if self.disabled and not (self.hits or self.misses or self.bypasses):
            return "off"
        kinds = [k for k, n in (("hit", self.hits), ("miss", self.misses)) if n]
        if self.bypasses:
            kinds.append("bypass")
        return kinds[0] if len(kinds) == 1 else "mixed" if kinds else ""


@holds_places
@dataclass(frozen=True)
class ColdCompile:
    """An earlier cell that generated the graphs a warm cell loaded."""

    seconds: float
    #: the cell, a :class:`~stance_magic.place.Place` read as its words:
    #: ``In [4]`` (or ``cell 2``)
    cell: str = field(metadata=worded("where"))
    #: how many of the warm cell's compiles it matched
    matched: int


@dataclass(frozen=True)
class CompileCaches:
    """Where the cell's compile time came from: the AOTAutograd cache and
    Inductor's FX graph cache. Hits and misses as torch's records count them,
    bypasses as torch logged them; empty when nothing compiled with Inductor."""

    fx_hits: int = 0
    fx_misses: int = 0
    fx_bypasses: int = 0
    aot_hits: int = 0
    aot_misses: int = 0
    aot_bypasses: int = 0
    #: compile time outside Dynamo of compiles whose graphs came from the
    #: caches / were generated (misses, bypasses, caches off)
    loaded_s: float = 0.0
    generated_s: float = 0.0
    #: what torch recorded for generating the graphs the hits loaded
    saved_s: float | None = None
    #: "warm", "partly warm", "cold", "caches off" or "" (no Inductor compile)
    state: str = ""
    #: Dynamo's tracing time of the compiles that consulted a cache
    dynamo_s: float = 0.0
    #: compiles that consulted a cache, and those whose graphs all came from one
    consulted: int = 0
    loaded: int = 0
    #: the caches switched off, by torch's name for each (``"aot_autograd"``,
    #: ``"inductor"``: the AOTAutograd cache, the FX graph cache)
    off: list[str] = field(default_factory=list)
    #: torch's reasons for the bypasses
    bypass_reasons: list[str] = field(default_factory=list)
    #: the file of a %stance cache load whose artifacts these hits used
    loaded_from: str | None = None
    #: an earlier cell that compiled the same graphs cold (warm cells only)
    cold: ColdCompile | None = None

    @property
    def graphs(self) -> int:
        """Graphs that went through the FX graph cache (hit, miss or bypass)."""
        return self.fx_hits + self.fx_misses + self.fx_bypasses

    @property
    def verdict(self) -> str:
        """One line: warm, partly warm, cold or caches off, and why."""
        from ..render import cache_verdict

        return cache_verdict(self)


@dataclass(frozen=True)
class PrecompiledFrame(NamedPlace):
    """A lookup of Dynamo's precompiled frames (``caching_precompile``) at a
    ``torch.compile(fn)`` in the block: ``outcome`` is ``"hit"`` (torch
    installed the saved frame: no tracing), ``"stale"`` (the cell's code
    changed since it was saved: not used, traced again), ``"unchecked"``
    (cell code that could not be checked: not used), ``"incomplete"`` (saved
    without its compiled graphs: torch traces it again), ``"guards"``
    (installed, but its guards did not match the call: traced again) or
    ``"miss"`` (nothing saved for it)."""

    name: str
    filename: str = ""
    line: int | None = None
    outcome: str = "miss"
    why: str = ""
    file: str = ""
    #: ``"guards"``: the saved frame's guards that refused the call, as
    #: torch words them (``tensor 'x' dtype mismatch. expected Float, actual
    #: Double``); empty where Dynamo's new trace did not get as far as its
    #: own guards
    failed_guards: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoadedFunction(NamedPlace):
    """A compiled function read back with ``torch.compiler.load_compiled_function``
    (saved from an ``aot_compile``): no tracing, no compile record; ``seconds``
    is the load, timed around torch's function."""

    name: str
    filename: str = ""
    line: int | None = None
    seconds: float = 0.0
    #: what the load raised (``Type: message``), if it failed
    error: str | None = None
    #: the file as a reader knows it (``In [3]``, ``site-packages/…``)
    file: str = ""


@dataclass(frozen=True)
class Shared:
    """What ``--trace`` and ``--timeline`` wrote for the cell (see
    :mod:`stance_magic.share`)."""

    #: this cell's structured trace (what TORCH_TRACE writes) and its compile ids
    trace_file: str | None = None
    trace_compile_ids: list[str] = field(default_factory=list)
    #: tlparse's index.html of it
    tlparse_index: str | None = None
    #: the cell as a Chrome trace / Perfetto JSON file
    timeline_file: str | None = None
