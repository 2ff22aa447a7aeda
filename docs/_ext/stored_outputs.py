"""Sphinx extension: the notebooks' stored outputs must be those of a clean run.

The docs render the notebooks from their stored outputs (myst-nb with
``nb_execution_mode = "off"``; ``make test`` executes them under nbval), and
myst-nb renders a stored traceback like any other output. This extension
reads each notebook as Sphinx reads it and warns, so that ``make docs``
(warnings as errors) fails, on

- a code cell with an error output that is not tagged ``raises-exception``
  (the tag nbval and nbclient read for a cell that is meant to raise);
- a code cell that was never run (no execution count): outputs missing.
"""

from __future__ import annotations

import json
from typing import Any

from sphinx.util import logging

logger = logging.getLogger(__name__)

RAISES = "raises-exception"
FIX = "run `python notebooks/build_tour.py --save` to store a clean run"


def problems(nb: dict[str, Any]) -> list[str]:
    """What is wrong with a notebook's stored outputs, one line per cell."""
    found = []
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    for n, cell in enumerate(code, 1):
        source = "".join(cell.get("source", ""))
        first = source.strip().splitlines()[0][:60] if source.strip() else ""
        tags = cell.get("metadata", {}).get("tags", [])
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and RAISES not in tags:
                found.append(
                    f"code cell {n} ({first!r}) has a stored error, "
                    f"{out.get('ename')}: {out.get('evalue', '')[:120]}"
                )
        if source.strip() and cell.get("execution_count") is None:
            found.append(f"code cell {n} ({first!r}) was not run: no stored outputs")
    return found


def _check(app: Any, docname: str, source: list[str]) -> None:
    path = str(app.env.doc2path(docname))
    if not path.endswith(".ipynb"):
        return
    try:
        nb = json.loads(source[0])
    except ValueError as exc:
        logger.warning(f"{path}: not a notebook ({exc})", location=docname)
        return
    for line in problems(nb):
        logger.warning(f"{line}; {FIX}", location=docname)


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", _check)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
