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
    """Write via a temporary file beside the target, then rename: the target
    is replaced whole or left as it was. Errors name the user's path; an
    existing file keeps its permissions, a new one gets the umask's."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a directory")
    directory = target.parent
    if not directory.is_dir():
        raise FileNotFoundError(f"no directory {directory} for {target}")
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
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
