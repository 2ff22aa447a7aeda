"""Write the history as CSV or JSON, whole or not at all, to a regular file."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def atomic_write(path: str | os.PathLike[str], text: str | bytes) -> Path:
    """Write via a temporary file beside the target, then rename: the target
    is replaced whole or left as it was. Errors name the user's path; an
    existing file keeps its permissions, a new one gets the umask's.

    A symbolic link is written through (the file it points to is replaced,
    the link stays); anything that is not a regular file (``/dev/stdout``, a
    device node, a pipe) is refused, never replaced. Text that UTF-8 cannot
    hold (a surrogate-escaped byte from a file name or an error message) is
    written as a backslash escape; bytes are written as they are.
    """
    target, real, mode = check_target(path)
    data = text if isinstance(text, bytes) else text.encode("utf-8", errors="backslashreplace")
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", dir=real.parent)
    try:
        try:
            fh = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            raise
        with fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


def check_target(path: str | os.PathLike[str]) -> tuple[Path, Path, int]:
    """(the path as given, the file it leads to, the mode to write it with),
    or the error a write would raise, before anything is written."""
    target = Path(path).expanduser()
    try:
        st = os.stat(target)  # follows links: what the path leads to
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{target} is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a file")
        raise OSError(
            errno.EINVAL, f"not a regular file ({kind}); history exports write regular files only"
        )
    real = Path(os.path.realpath(target))  # a link (even a dangling one) is written through
    directory = real.parent
    if not directory.is_dir():
        raise FileNotFoundError(f"no directory {directory} for {target}")
    if st is not None:
        mode = st.st_mode & 0o7777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    if not os.access(directory, os.W_OK):
        raise PermissionError(errno.EACCES, f"cannot write in {directory}")
    return target, real, mode


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


def reason_of(err: OSError) -> str:
    """An OSError as the one line a user reads: its strerror, else its text."""
    return err.strerror if err.strerror else str(err)
