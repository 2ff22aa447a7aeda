"""File paths as a reader knows them: one convention for the report, the
timeline and the bug-report bundle.

A notebook cell's file is ``In [N]``. A file under an import root (an
installed package's ``site-packages``, the standard library, any folder on
``sys.path``: an editable install, a project's folder) is shown from that
root, as its module is named and as torch's own log prefix writes it
(``torch/_dynamo/eval_frame.py``). Anything else is shown from the notebook's
folder (the current directory) as ``./``, else with the venv, Python, the
temporary directory and the home directory as ``<venv>``, ``<python>``,
``<tmp>``, ``~``.

A file is written here too, whole or not at all (:func:`atomic_write`, the
history's exports, the warm-start cache file, the timeline and the bundle),
to a path checked before anything is written (:func:`check_target`).
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

from .notebook import cell_number_of_file, cell_numbers

__all__ = [
    "atomic_write",
    "check_target",
    "is_library",
    "reason_of",
    "short_path",
    "shorten_paths",
]


def short_path(path: str) -> str:
    """One file path as a reader knows it.

    Examples
    --------
    >>> import site
    >>> short_path(site.getsitepackages()[0] + "/torch/_dynamo/eval_frame.py")
    'torch/_dynamo/eval_frame.py'
    >>> short_path("<string>")
    '<string>'
    """
    if not path:
        return path
    cell = cell_number_of_file(path)
    if cell is not None:
        return f"In [{cell}]"
    if not os.path.isabs(path):
        return path
    for prefix, short in _prefixes(os.getcwd(), tuple(sys.path)):
        if path == prefix:
            return short or "."
        if path.startswith(prefix + os.sep):
            rest = path[len(prefix) + 1 :]
            return f"{short}{os.sep}{rest}" if short else rest
    return path


def shorten_paths(text: str, extra: dict[str, str] | None = None) -> str:
    """``text`` with every absolute path in it shortened as :func:`short_path`
    shortens one; ``extra`` maps more prefixes (a trace's folder, say)."""
    for name, n in sorted(cell_numbers().items(), key=lambda kv: len(kv[0]), reverse=True):
        text = text.replace(name, f"In [{n}]")
    pairs = list(_prefixes(os.getcwd(), tuple(sys.path)))
    if extra:
        pairs = sorted(
            [*pairs, *((k.rstrip(os.sep), v) for k, v in extra.items())],
            key=lambda pr: len(pr[0]),
            reverse=True,
        )
    for prefix, short in pairs:
        text = text.replace(prefix + os.sep, short + os.sep if short else "")
        text = re.sub(re.escape(prefix) + r"(?![\w.-])", short or ".", text)
    return text


def is_library(path: str) -> bool:
    """A file of an installed package or of Python itself (not the user's)."""
    if not path or path.startswith("<"):
        return False  # a notebook cell or an exec'd string
    real = os.path.realpath(path)
    return any(real.startswith(root + os.sep) for root in _library_roots())


def _library_roots() -> tuple[str, ...]:
    import site

    roots = [*site.getsitepackages(), site.getusersitepackages(), sys.base_prefix, sys.prefix]
    return tuple(os.path.realpath(r) for r in roots if r)


@functools.lru_cache(maxsize=4)
def _prefixes(cwd: str, path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(absolute prefix, what it becomes), longest first: the import roots
    become "" (a module path), then the places a file of the user's can be."""
    import site
    import sysconfig

    roots = [*site.getsitepackages(), site.getusersitepackages()]
    roots += [p for key in ("stdlib", "platstdlib") if (p := sysconfig.get_paths().get(key))]
    roots += [e for e in path if e and os.path.isabs(e) and os.path.isdir(e)]
    pairs = [(r, "") for r in roots]
    pairs.append((cwd, "."))
    pairs.append((sys.prefix, "<venv>"))
    pairs.append((sys.base_prefix, "<python>"))
    pairs.append((tempfile.gettempdir(), "<tmp>"))
    pairs.append((os.path.expanduser("~"), "~"))
    out: list[tuple[str, str]] = []
    seen = set()
    for p, r in pairs:
        for q in {p, os.path.realpath(p)}:
            q = q.rstrip(os.sep)
            if q and q != os.sep and q not in seen:
                seen.add(q)
                out.append((q, r))
    return tuple(sorted(out, key=lambda pr: len(pr[0]), reverse=True))


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


def reason_of(err: OSError) -> str:
    """An OSError as the one line a user reads: its strerror, else its text."""
    return err.strerror if err.strerror else str(err)
