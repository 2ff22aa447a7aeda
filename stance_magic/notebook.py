"""What stance_magic reads of the running IPython shell and kernel, in one place.

IPython compiles each cell under a file name of its own and keeps the map
from those names to the cell's number (``In [7]``) in a private attribute of
its compiler; the kernel keeps the header of the message it is handling; the
extension manager's ``reload_extension`` is the only sign of a
``%reload_ext``. Everything that reads such internals is here, as
:mod:`stance_magic.probe` is for torch's: a change in IPython or ipykernel is
a change to this module. Nothing here imports IPython: it is looked up in
``sys.modules``, so the engine and the report stay free of it.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = [
    "cell_number",
    "cell_number_of_file",
    "cell_numbers",
    "cell_sources",
    "in_reload",
    "running_cell_number",
    "sent_before",
]


def _shell() -> Any:
    # IPython's own module first: ``IPython.get_ipython`` is, since IPython
    # 9, a module ``__getattr__`` that runs an import statement on each read
    # (a measured cell reads the shell several times, on caches a model's
    # code left cold)
    getipython = sys.modules.get("IPython.core.getipython")
    get = getattr(getipython, "get_ipython", None) if getipython is not None else None
    if get is None:
        ip = sys.modules.get("IPython")
        get = getattr(ip, "get_ipython", None) if ip is not None else None
    return get() if get is not None else None


def cell_numbers(shell: Any = None) -> dict[str, int]:
    """IPython's file name of each cell run so far → the cell's number
    (``In [N]``); empty outside IPython."""
    shell = shell if shell is not None else _shell()
    names = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    return {k: v for k, v in names.items() if isinstance(v, int) and v > 0}


def cell_sources(shell: Any = None) -> dict[int, str]:
    """The code of each cell run so far, by its number, as IPython compiled
    it (from ``linecache``, where IPython keeps every cell: a ``%%stance``
    cell's body is a file of its own under the same number, joined here)."""
    import linecache

    out: dict[int, list[str]] = {}
    for name, number in cell_numbers(shell).items():
        lines = linecache.getlines(name)
        if lines:
            out.setdefault(number, []).append("".join(lines))
    return {n: "\n".join(texts) for n, texts in out.items()}


def cell_number_of_file(path: str) -> int | None:
    """The number of the cell compiled under ``path``, or None for any other
    file. torch shortens paths in some messages (``mp/ipykernel_1/2.py``):
    a relative ``path`` matches the end of a cell's file name."""
    if not path:
        return None
    shell = _shell()
    raw = getattr(getattr(shell, "compile", None), "_filename_map", None)
    if not raw:
        return None
    n = raw.get(path)  # (IPython's map grows by a cell a cell: no copy of it here)
    if isinstance(n, int) and n > 0:
        return n
    if path.startswith(("/", "<")):
        return None
    names = cell_numbers(shell)
    return next((n for name, n in names.items() if name.endswith(path)), None)


def running_cell_number() -> int | None:
    """The number of the cell running now: the outermost notebook cell on
    the stack, or None outside one."""
    names = cell_numbers()
    if not names:
        return None
    found = None
    f = sys._getframe(1)
    while f is not None:
        number = names.get(f.f_code.co_filename)
        if number is not None:
            found = number
        f = f.f_back
    return found


def cell_number(shell: Any) -> int:
    """The number IPython gave the cell that is running (``In [N]``): the
    innermost cell whose compiled file name is on the stack, else the
    shell's count (a cell magic runs before its cell has a file)."""
    names = getattr(shell.compile, "_filename_map", {})
    frame = sys._getframe(1)
    while frame is not None:
        number = names.get(frame.f_code.co_filename)
        if number is not None:
            return number
        frame = frame.f_back
    return shell.execution_count


def in_reload(ipython: Any) -> bool:
    """Whether IPython's ``reload_extension`` (``%reload_ext``) is on the
    stack: how an unload that a load follows tells itself apart."""
    manager = getattr(ipython, "extension_manager", None)
    codes = {
        getattr(getattr(klass, "reload_extension", None), "__code__", None)
        for klass in type(manager).__mro__
    } - {None}
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def sent_before(moment: float | None, slack_s: float = 0.0) -> bool:
    """Whether the widget message the kernel is handling now was sent before
    ``moment`` (``time.time()``) less ``slack_s``: a kernel reads widget
    messages between cells, so a message sent while a cell ran waited for
    it. Compares the message's own date with ``moment``; False without a
    kernel, for another kind of message, or with no date to read."""
    if moment is None:
        return False
    try:
        kernel = getattr(_shell(), "kernel", None)
        parent = kernel.get_parent("shell") if kernel is not None else None
        header = (parent or {}).get("header") or {}
        if header.get("msg_type") != "comm_msg":
            return False
        sent = header.get("date")
        if isinstance(sent, str):
            import datetime

            sent = datetime.datetime.fromisoformat(sent.replace("Z", "+00:00"))
        sent_s = sent.timestamp()
    except Exception:  # no kernel, an older one, or an unreadable date
        return False
    return sent_s < moment - slack_s
