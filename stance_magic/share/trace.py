"""tlparse run on one cell's structured trace (``--trace DIR``), and where the
panel's traces go. The trace's capture and its part of the report are built
by :mod:`stance_magic.builder.sharing`.

No torch internals here: :mod:`stance_magic.probe.trace` holds them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PANEL_TRACE_DIR",
    "TlparseRun",
    "run_tlparse",
    "tlparse_command",
]

#: where the panel's "trace next cell" writes (relative: the notebook's folder)
PANEL_TRACE_DIR = "stance_traces"

#: tlparse is given this long for one cell's trace
TLPARSE_TIMEOUT_S = 300


@dataclass
class TlparseRun:
    out: Path | None = None
    index: Path | None = None
    error: str | None = None


def tlparse_command() -> str | None:
    """The ``tlparse`` executable: on PATH or beside this Python."""
    found = shutil.which("tlparse")
    if found:
        return found
    beside = Path(sys.executable).parent / "tlparse"
    return str(beside) if beside.exists() else None


def run_tlparse(
    log: str | os.PathLike[str], out: str | os.PathLike[str] | None = None
) -> TlparseRun:
    """Run ``tlparse LOG -o OUT --no-browser --overwrite`` (OUT: beside the
    log, its name without ``.log`` plus ``_tlparse``)."""
    exe = tlparse_command()
    if exe is None:
        return TlparseRun(error="not installed (pip install tlparse): the trace was not parsed")
    log = Path(log)
    out = Path(out) if out is not None else log.with_name(log.stem + "_tlparse")
    try:
        done = subprocess.run(
            [exe, str(log), "-o", str(out), "--no-browser", "--overwrite"],
            capture_output=True,
            text=True,
            timeout=TLPARSE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return TlparseRun(out=out, error=f"could not run: {err}")
    index = out / "index.html"
    if done.returncode != 0 or not index.exists():
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no output"]
        return TlparseRun(out=out, error=f"exited {done.returncode}: {tail[0]}")
    return TlparseRun(out=out, index=index)
