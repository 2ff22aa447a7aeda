"""Where a benchmark's figures were taken, for its ``--json`` output.

Every ``bench_*.py`` that ``docs/performance.md`` draws on writes
``env`` (this module's :func:`environment`), ``command`` and ``seconds``
into its JSON, so the page can say on what machine, with which torch and by
which command its figures were taken (``benchmarks/perf_page.py``).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from typing import Any


def environment() -> dict[str, Any]:
    """Platform, Python, torch (the installed distribution: no import) and CPU count."""
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - torch is required
        torch = "missing"
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch,
        "cpus": os.cpu_count(),
    }


def command(script: str, argv: list[str] | None) -> str:
    """The command line that reproduces a run, as run from the repository root."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join([".venv/bin/python", f"benchmarks/{script}", *args])
