"""A report's export rows: the columns of :meth:`CellReport.summary_row
<stance_magic.report.CellReport.summary_row>` made from its parts (a
compiled call's parts, the GPU's figures, ``--compare``'s)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .deprecated import warn_once

if TYPE_CHECKING:
    from ..probe import MemoryFigure
    from .compare import Comparison
    from .cudagraphs import CudaGraphs
    from .lookups import CallParts


#: The columns of the previous release, read for one more release with a
#: ``DeprecationWarning`` (once each): old name -> its name now. The figure is
#: *cache lookups* wherever it is shown (the report's row, the history and
#: sweep columns, the charts, the CSV), not "guards": it holds building the
#: frame's locals as well as running the guards (see docs/measurement.md).
OLD_COLUMNS = {
    "guard_s": "lookup_s",
    "guard_lower_bound": "lookup_lower_bound",
    "guard_lookups_timed": "lookups_timed",
    "guard_lookups_untimed": "lookups_untimed",
    "guard_lookups_sampled": "lookups_sampled",
    "guard_lookups_calibrated": "lookups_calibrated",
}


class SummaryRow(dict[str, Any]):
    """A report's flat row (:meth:`CellReport.summary_row
    <stance_magic.report.CellReport.summary_row>`): a plain dict whose old
    column names (:data:`OLD_COLUMNS`) still read, with a warning."""

    def __missing__(self, key: str) -> Any:
        new = OLD_COLUMNS.get(key)
        if new is None or new not in self:
            raise KeyError(key)
        warn_once(f"summary_row()[{key!r}]", f"summary_row()[{new!r}]", "the column")
        return self[new]


class _CudaFigures(Protocol):
    """What :func:`_cuda_row` reads of a report (a :class:`CellReport
    <stance_magic.report.CellReport>`, which imports this module)."""

    synchronized: bool
    memory: list[MemoryFigure]
    kernel_breakdown: dict[str, float]
    first_run_breakdown: dict[str, float]
    cudagraphs: CudaGraphs
    call_parts: CallParts | None


_COMPARE_KEYS = (
    "eager_s",
    "compiled_s",
    "eager_peak_bytes",
    "compiled_first_peak_bytes",
    "compiled_steady_peak_bytes",
    "speedup",
    "break_even_calls",
)


def _parts_row(p: CallParts | None) -> dict[str, Any]:
    """The parts of a compiled call: columns after every earlier one."""
    return {
        "call_s": p.call_s if p is not None else None,
        "call_wrapper_s": p.wrapper_s if p is not None else None,
        "call_lookup_s": p.lookup_s if p is not None else None,
        "call_compiled_s": p.compiled_s if p is not None else None,
        "call_eager_s": p.eager_s if p is not None else None,
        "call_lookup_bounded": p.lookup_bounded if p is not None else None,
    }


def _cuda_row(rep: _CudaFigures) -> dict[str, Any]:
    """The GPU's columns of a summary row, after every other: whether the
    times were synchronized, Inductor's named parts, CUDA graphs, CUDA memory."""
    cg = rep.cudagraphs
    cuda = next((m for m in rep.memory if m.device.startswith("cuda")), None)
    kb, fr = rep.kernel_breakdown, rep.first_run_breakdown
    return {
        "synchronized": rep.synchronized,
        "kernel_compile_s": kb.get("kernel_compile", 0.0),
        "autotune_s": kb.get("autotune", 0.0),
        "first_run_autotune_s": fr.get("runtime_autotune", 0.0),
        "cudagraph_record_s": fr.get("cudagraph_record", 0.0) + kb.get("cudagraph_record", 0.0),
        "cudagraphs_recorded": cg.recorded,
        "cudagraphs_for_new_sizes": cg.for_new_sizes,
        "cudagraphs_rerecorded": cg.rerecorded,
        "cudagraphs_replayed": cg.replayed,
        "cudagraphs_skipped": cg.skipped,
        "cudagraph_skip_reasons": " | ".join(s.reason for s in cg.skips if s.reason),
        "cuda_peak_bytes": cuda.peak_bytes if cuda is not None else None,
        "cuda_peak_reserved_bytes": cuda.peak_reserved_bytes if cuda is not None else None,
        "cuda_reserved_bytes": cuda.reserved_bytes if cuda is not None else None,
        "cudagraphs_pending_backward": len(cg.pending_backward),
        "cudagraph_output_overwritten": cg.overwritten_output,
        # a compiled call's code on the GPU (CallParts.device_s)
        "call_device_s": rep.call_parts.device_s if rep.call_parts is not None else None,
    }


def _compare_row(c: Comparison | None) -> dict[str, Any]:
    """--compare's columns of a summary row (None in each without --compare)."""
    return {k: getattr(c, k) if c is not None else None for k in _COMPARE_KEYS}


def _tracing_row(tracing: Any) -> dict[str, Any]:
    """The tracing-by-function columns of a summary row, after every other:
    whether torch's profiler timed the cell (``tracing_state``), the seconds
    it timed, and the function of most inclusive tracing time with its
    seconds (the whole table is in the report's JSON, ``tracing``)."""
    top = tracing.top(1)
    return {
        "tracing_state": tracing.state,
        "traced_s": tracing.traced_s if tracing.measured else None,
        "tracing_top": top[0].where if top and tracing.measured else "",
        "tracing_top_s": top[0].cumulative_s if top and tracing.measured else None,
    }
