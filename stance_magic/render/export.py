"""The history as CSV and JSON: the texts, and both files written whole or
neither (through :func:`stance_magic.paths.atomic_write`)."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any, Iterable

from ..paths import atomic_write, check_target, reason_of


class ExportError(OSError):
    """One export of several could not be written; ``written`` lists those that were."""

    def __init__(self, path: str, reason: str, written: list[Path]) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason
        self.written = written

    def __str__(self) -> str:
        done = ", ".join(str(p) for p in self.written)
        tail = f" (already written: {done})" if done else " (nothing was written)"
        return f"cannot write {self.path}: {self.reason}{tail}"


def csv_text(reports: Iterable[Any]) -> str:
    rows = [r.summary_row() for r in reports]
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def json_text(reports: Iterable[Any]) -> str:
    data = [r.to_dict() for r in reports]
    return json.dumps(data, indent=1, default=str) + "\n"


def write_json(reports: Iterable[Any], path: str | os.PathLike[str]) -> Path:
    """Every report in full (``CellReport.to_dict``), whole or not at all."""
    return atomic_write(path, json_text(reports))


def write_exports(
    reports: Iterable[Any],
    csv_path: str | os.PathLike[str] | None = None,
    json_path: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """Write the CSV and the JSON export, both or neither: every target is
    checked before the first is written, so a bad path writes nothing. A
    failure after that (the disk filled up) says what was already written."""
    reports = list(reports)
    jobs = [(p, fn) for p, fn in ((csv_path, csv_text), (json_path, json_text)) if p]
    for path, _ in jobs:
        try:
            check_target(path)
        except OSError as err:
            raise ExportError(str(path), reason_of(err), []) from None
    written: list[Path] = []
    for path, text in jobs:
        try:
            written.append(atomic_write(path, text(reports)))
        except OSError as err:
            raise ExportError(str(path), reason_of(err), written) from None
    return written
