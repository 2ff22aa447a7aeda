"""The results of a cell run besides once: ``--compare``'s
(:class:`CompareResult`, with each side's :class:`Steady` state) and
``--sweep``'s (:class:`SweepResult`). Run by
:mod:`stance_magic.session.compare`, their figures made by
:mod:`stance_magic.builder.compare`, their words
:mod:`stance_magic.render.results`'s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cell import CellReport

__all__ = ["CompareResult", "Steady", "SweepResult"]


@dataclass
class Steady:
    """Steady-state timing of repeated runs: warm-up (the first run) excluded
    (made by :func:`stance_magic.builder.compare.steady`)."""

    runs: list[float]
    median: float
    low: float
    high: float
    iqr: float
    n: int
    warning: str | None = None


@dataclass
class CompareResult:
    """The cell under ``force_eager`` and under a stance, side by side."""

    report: CellReport
    eager_runs: list[float]
    compiled_runs: list[float]
    eager_steady: Steady
    compiled_steady: Steady
    value: Any = None
    warnings: list[str] = field(default_factory=list)

    def text(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> str:
        """The report (with its hints unless ``hints`` is False; every row
        with ``verbose``), then every run's time."""
        from ..render import MAX_DETAILS
        from ..render.results import compare_text

        n = MAX_DETAILS if max_details is None else max_details
        return compare_text(self, n, verbose, self.advice() if hints else ())

    def html(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> str:
        """The report (the spread warnings are in its notes already)."""
        from ..render import MAX_DETAILS, report_html

        n = MAX_DETAILS if max_details is None else max_details
        return report_html(self.report, n, verbose, self.advice() if hints else ())

    def views(
        self, max_details: int | None = None, verbose: bool = False, hints: bool = True
    ) -> tuple[str, str]:
        """(text, HTML), the hints drawn once for both."""
        from ..render import MAX_DETAILS
        from ..render.results import compare_views

        n = MAX_DETAILS if max_details is None else max_details
        return compare_views(self, n, verbose, self.advice() if hints else ())

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return self.html()

    def figure(self) -> Any:
        from ..plots import compare_figure

        return compare_figure(self)

    def advice(self) -> list[str]:
        from ..render.advice import advise

        return advise(self.report)


@dataclass
class SweepResult:
    """One run of the cell per stance, each from cold compiled caches."""

    reports: list[CellReport]
    #: each stance's first-run memory was measured (a second run from cold)
    memory: bool = False
    #: each other stance's run against default's, a
    #: :class:`~stance_magic.report.CellDiff` each (none without a default run)
    against: list[Any] = field(default_factory=list)

    def against_default(self) -> list[Any]:
        """Each other stance's run against default's: a
        :class:`~stance_magic.report.CellDiff` each (``%stance diff default
        STANCE`` shows one whole); none without a default run."""
        return list(self.against)

    def __str__(self) -> str:
        from ..render.results import sweep_text

        return sweep_text(self)

    def _repr_html_(self) -> str:
        from ..render.results import sweep_html

        return sweep_html(self)

    def figure(self) -> Any:
        from ..plots import sweep_figure

        return sweep_figure(self)

    def advice(self) -> list[str]:
        from ..render.advice import advise_sweep

        return advise_sweep(self)
