"""The per-cell report: what torch.compile did in one measured block.

:class:`CellReport` is plain data (a dataclass with :meth:`CellReport.to_dict`);
it is built from what :class:`stance_magic.probe.Recorder` saw. Rendering
lives in :mod:`stance_magic.render`.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from . import probe

PHASES = ("dynamo", "aot_autograd", "backend", "codegen", "other")
PHASE_LABELS = {
    "dynamo": "Dynamo tracing",
    "aot_autograd": "AOTAutograd",
    "backend": "Inductor/backend",
    "codegen": "code generation",
    "other": "other",
}


@dataclass
class FrameCompile:
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
    failed: str | None = None

    @property
    def where(self) -> str:
        loc = short_path(self.filename) or "?"
        if not self.line:
            return f"{self.name} ({loc})"
        sep = ", line " if loc.startswith("In [") else ":"
        return f"{self.name} ({loc}{sep}{self.line})"


@dataclass
class Recompile:
    reason: str
    where: str
    compile_id: str


@dataclass
class GraphBreak:
    reason: str
    count: int
    summary: str


@dataclass
class CellReport:
    """What torch.compile did and cost in one measured cell.

    All times are seconds. ``compile_s`` is the sum of torch's own
    ``CompilationMetrics`` records that landed in the cell (forward frames
    and lazily compiled backward graphs); ``compile_breakdown`` splits it
    into exclusive phases. ``cache_hits``/``cache_misses`` count calls into
    compiled frames (a call into an empty cache that compiles is a miss).
    ``guard_s`` is the guard evaluation time of the cell, measured as
    ``guard_method`` says. ``index`` is the report's position in the
    history (1 for the first); ``execution_count`` is the number IPython gave
    the cell (``In [7]``), when a front end knows it.
    """

    stance: str = "default"
    skip_guard_eval_unsafe: bool = False
    backend: str | None = None
    index: int = 0
    execution_count: int | None = None
    label: str | None = None
    source: str = ""
    wall_s: float = 0.0
    compile_s: float = 0.0
    compile_breakdown: dict[str, float] = field(default_factory=dict)
    compiles: int = 0
    backward_compiles: int = 0
    recompiles: list[str] = field(default_factory=list)
    recompile_details: list[Recompile] = field(default_factory=list)
    graph_breaks: list[str] = field(default_factory=list)
    graph_break_details: list[GraphBreak] = field(default_factory=list)
    cache_hits: int = 0
    cache_misses: int = 0
    guard_count: int = 0
    guard_s: float | None = None
    guard_per_call_s: float | None = None
    guard_method: str = ""
    eager_fallbacks: int = 0
    refused_recompiles: int = 0
    eager_first_calls: int = 0
    error: str | None = None
    frames: list[FrameCompile] = field(default_factory=list)
    # Filled in by --compare (see stance_magic.compare)
    eager_s: float | None = None
    compiled_s: float | None = None
    speedup: float | None = None
    break_even_calls: int | None = None
    runs: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def stance_label(self) -> str:
        """The stance with its flags, as a user would type it: ``default -u``."""
        label = self.stance
        if self.backend:
            label += f" -b {self.backend}"
        if self.skip_guard_eval_unsafe:
            label += " -u"
        return label

    @property
    def compiled_anything(self) -> bool:
        return bool(self.compiles or self.backward_compiles)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready) for export."""
        return asdict(self)

    def summary_row(self) -> dict[str, Any]:
        """One flat row for the history table and CSV export."""
        return {
            "cell": self.index,
            "execution_count": self.execution_count,
            "label": self.label or first_line(self.source),
            "stance": self.stance,
            "stance_label": self.stance_label,
            "skip_guard_eval_unsafe": self.skip_guard_eval_unsafe,
            "backend": self.backend or "",
            "wall_s": self.wall_s,
            "compile_s": self.compile_s,
            **{f"{p}_s": self.compile_breakdown.get(p, 0.0) for p in PHASES},
            "compiles": self.compiles,
            "backward_compiles": self.backward_compiles,
            "recompiles": len(self.recompiles),
            "graph_breaks": sum(g.count for g in self.graph_break_details),
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "guard_count": self.guard_count,
            "guard_s": self.guard_s,
            "eager_fallbacks": self.eager_fallbacks,
            "eager_first_calls": self.eager_first_calls,
            "refused_recompiles": self.refused_recompiles,
            "eager_s": self.eager_s,
            "compiled_s": self.compiled_s,
            "speedup": self.speedup,
            "break_even_calls": self.break_even_calls,
            "error": self.error or "",
        }

    def advice(self) -> list[str]:
        """At most three hints drawn from this report's numbers."""
        from .advice import advise

        return advise(self)

    def figure(self) -> Any:
        """Compile, guard evaluation and execution as a stacked bar."""
        from .plots import report_figure

        return report_figure(self)

    # Rendering is delegated so the data class stays plain.
    def __str__(self) -> str:
        from .render import report_text

        return report_text(self)

    def _repr_html_(self) -> str:
        from .render import report_html

        return report_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def short_path(path: str) -> str:
    """A file path as a reader knows it: a notebook cell as ``In [N]``, a
    library file without its site-packages (or current directory) prefix."""
    import os
    import site

    cell = _cell_number(path)
    if cell is not None:
        return f"In [{cell}]"
    prefixes = [*site.getsitepackages(), site.getusersitepackages(), os.getcwd()]
    for prefix in sorted(prefixes, key=len, reverse=True):
        prefix = prefix.rstrip(os.sep) + os.sep
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def _cell_number(path: str) -> int | None:
    """The execution count IPython gave the cell compiled under ``path``."""
    ip = sys.modules.get("IPython")
    get = getattr(ip, "get_ipython", None) if ip is not None else None
    shell = get() if get is not None else None
    names = getattr(getattr(shell, "compile", None), "_filename_map", None)
    if not names or path not in names:
        return None
    number = names[path]
    return number if isinstance(number, int) and number > 0 else None


def first_line(source: str, width: int = 30) -> str:
    for line in source.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return line if len(line) <= width else line[: width - 1] + "…"
    return ""


def _first_line(text: str) -> str:
    """torch's reasons can carry a "User stack trace:" block and, after
    ``  # ``, the source line the guard came from: keep the reason itself."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else text
    return first.split("  # ")[0].split(" # ")[0].rstrip()


def error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    head = text[0] if text else ""
    return f"{type(exc).__name__}: {head}" if head else type(exc).__name__


def _gb_summary(reason: str) -> str:
    first = reason.strip().splitlines()[0] if reason.strip() else reason
    expl = ""
    for line in reason.splitlines():
        if line.strip().startswith("Explanation:"):
            expl = line.strip()[len("Explanation:") :].strip()
            break
    return f"{first}: {expl}" if expl else first


def build_report(
    rep: CellReport,
    *,
    window: probe.Window,
    stance: Any,
    wall_s: float,
    error: BaseException | None,
    source: str,
    label: str | None,
    index: int,
) -> CellReport:
    """Fill ``rep`` from a recorder window (in place; returns it)."""
    rep.stance = stance.name
    rep.skip_guard_eval_unsafe = stance.skip_guard_eval_unsafe
    rep.backend = stance.backend_name
    rep.index = index
    rep.label = label
    rep.source = source
    rep.wall_s = wall_s
    rep.error = error_line(error) if error is not None else None

    frames: list[FrameCompile] = []
    breakdown = dict.fromkeys(PHASES, 0.0)
    for rec in window.records:
        if probe.is_frame_compile(rec):
            kind = "frame"
        elif probe.is_backward_compile(rec):
            kind = "backward"
        else:
            continue
        phases = probe.record_phases(rec)
        for k, v in phases.items():
            breakdown[k] += v
        name = rec.co_name or "(backward)"
        filename, line = rec.co_filename or "", rec.co_firstlineno
        loc = probe.resume_location(rec.co_name)
        if loc:
            name = f"{rec.co_name} (after graph break in {loc})"
        elif kind == "frame" and probe.is_module_wrapper(rec):
            mod = window.module_frames.get(str(rec.compile_id))
            if mod is not None:
                name, filename, line = mod
        frames.append(
            FrameCompile(
                compile_id=str(rec.compile_id),
                kind=kind,
                name=name,
                filename=filename,
                line=line,
                seconds=probe.record_total_s(rec),
                phases=phases,
                guard_count=rec.guard_count,
                recompile_reason=rec.recompile_reason,
                failed=(f"{rec.fail_type}: {rec.fail_reason}" if rec.fail_type else None),
            )
        )
    rep.frames = frames
    cached = sum(getattr(r, "inductor_fx_local_cache_hit_count", 0) or 0 for r in window.records)
    if cached:
        rep.notes.append(
            f"{cached} graph{'s' if cached != 1 else ''} came from Inductor's on-disk FX "
            "graph cache: that compile time is a cache load, not a full Inductor compile"
        )
    rep.compile_s = sum(f.seconds for f in frames)
    rep.compile_breakdown = breakdown
    fwd = [f for f in frames if f.kind == "frame"]
    rep.compiles = len(fwd)
    rep.backward_compiles = len(frames) - len(fwd)
    rep.recompile_details = [
        Recompile(_first_line(f.recompile_reason), f.where, f.compile_id)
        for f in fwd
        if f.recompile_reason
    ]
    rep.recompiles = [r.reason for r in rep.recompile_details]
    rep.graph_break_details = [
        GraphBreak(reason, n, _gb_summary(reason)) for reason, n in window.graph_breaks.items()
    ]
    rep.graph_breaks = [g.summary for g in rep.graph_break_details for _ in range(g.count)]
    rep.guard_count = sum(f.guard_count or 0 for f in fwd)

    rep.cache_hits = window.hits
    rep.cache_misses = window.misses + window.cold_compiles
    # A miss that compiled nothing: the stance ran the frame eagerly
    # (eager_on_recompile) or refused to recompile (fail_on_recompile).
    uncompiled_misses = max(window.misses - (rep.compiles - window.cold_compiles), 0)
    # aot_eager_then_compile compiles its first call under aot_eager (counted
    # as a compile); only eager_then_compile runs it eagerly.
    rep.eager_first_calls = window.eager_first_calls if stance.name == "eager_then_compile" else 0
    if stance.name == "eager_on_recompile":
        rep.eager_fallbacks = uncompiled_misses
        if not window.hits and not window.misses:
            rep.notes.append(
                "eager_on_recompile runs a function with no compiled code eagerly "
                "without a cache lookup: such calls are not counted"
            )
    elif stance.name == "fail_on_recompile":
        rep.refused_recompiles = uncompiled_misses
        if not rep.refused_recompiles and rep.error and "fail_on_recompile" in rep.error:
            rep.refused_recompiles = 1  # refused from an empty cache: no lookup first

    lookups = window.hits + window.misses
    costs = list(window.known_costs_s.values())
    if window.profiled_lookups is not None:
        n, total = window.profiled_lookups
        rep.guard_s = total
        rep.guard_per_call_s = total / n if n else None
        rep.guard_method = (
            f"measured: {n} '{probe.CACHE_LOOKUP_EVENT}' profiler events (frame locals "
            "plus guards); the profiler slows the rest of the cell"
        )
    elif stance.skip_guard_eval_unsafe:
        rep.guard_method = (
            "not estimated: skip_guard_eval_unsafe runs only the guards that tell "
            "cache entries apart"
        )
    elif lookups and costs:
        per = statistics.median(costs)
        rep.guard_per_call_s = per
        rep.guard_s = per * lookups
        plural = "s" if lookups != 1 else ""
        rep.guard_method = (
            f"estimate: {lookups} cache lookup{plural} × {per * 1e6:.2f} µs, the median warm "
            f"guard check of {len(costs)} cached entr{'y' if len(costs) == 1 else 'ies'} "
            "(timed when each was compiled)"
        )
    elif lookups:
        rep.guard_method = "no timed cache entry (compiled before the probe was installed)"
    else:
        rep.guard_s = 0.0
        rep.guard_method = "no cache lookups in this cell"
    return rep
