"""Share a cell with the PyTorch tools: its structured trace for ``tlparse``,
a Chrome-trace/Perfetto timeline, a bug-report bundle.

* ``%%stance --trace DIR`` (``measure(trace=DIR)``): torch's structured trace
  (what ``TORCH_TRACE`` writes) of this cell alone, in a file in DIR; when
  ``tlparse`` is installed it is run on that file and the report links its
  ``index.html`` (:mod:`.trace`; the capture and the report's part:
  :mod:`stance_magic.builder.sharing`).
* ``%%stance --timeline FILE.json`` (``measure(timeline=FILE)``): the cell on
  its own wall clock as Chrome trace events (``ui.perfetto.dev``,
  ``chrome://tracing``) (:mod:`.timeline`).
* ``%stance bundle PATH`` (:func:`bundle`): one zip with what a bug report
  needs, and nothing else (:mod:`.bundling`).

No torch internals here: :mod:`stance_magic.probe.trace` holds them.
"""

from __future__ import annotations

from .bundling import BundleError, bundle, versions
from .timeline import timeline_events
from .trace import PANEL_TRACE_DIR, run_tlparse, tlparse_command

__all__ = [
    "PANEL_TRACE_DIR",
    "BundleError",
    "bundle",
    "run_tlparse",
    "timeline_events",
    "tlparse_command",
    "versions",
]
