"""Write the history as CSV or JSON, whole or not at all."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


def _atomic_write(path: str | os.PathLike[str], text: str) -> Path:
    target = Path(path).expanduser()
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


def csv_text(reports: Iterable[Any]) -> str:
    rows = [r.summary_row() for r in reports]
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def write_csv(reports: Iterable[Any], path: str | os.PathLike[str]) -> Path:
    """One row per measured cell; the file is replaced whole or left as it was."""
    return _atomic_write(path, csv_text(reports))


def write_json(reports: Iterable[Any], path: str | os.PathLike[str]) -> Path:
    """Every report in full (``CellReport.to_dict``), whole or not at all."""
    data = [r.to_dict() for r in reports]
    return _atomic_write(path, json.dumps(data, indent=1, default=str) + "\n")
