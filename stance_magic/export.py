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


def _atomic_write(path: str | os.PathLike[str], text: str) -> Path:
    """Write via a temporary file beside the target, then rename: the target
    is replaced whole or left as it was. Errors name the user's path; an
    existing file keeps its permissions, a new one gets the umask's.

    A symbolic link is written through (the file it points to is replaced,
    the link stays); anything that is not a regular file (``/dev/stdout``, a
    device node, a pipe) is refused, never replaced. Text that UTF-8 cannot
    hold (a surrogate-escaped byte from a file name or an error message) is
    written as a backslash escape.
    """
    target = Path(path).expanduser()
    data = text.encode("utf-8", errors="backslashreplace")
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
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", dir=directory)
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
