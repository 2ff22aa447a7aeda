"""Running a cell's code as IPython does, for the ``%%stance`` cell magic.

:func:`compile_cell` follows IPython's own recipe (transform, parse, split off
the last expression, compile with the cell's ``In [N]`` file name), so that
tracebacks, ``In [N]`` names in reports and top-level ``await`` behave as
without the magic. A ``SyntaxError`` is raised here, before any stance is
applied.

:func:`syntax_checker` is the extension's input transformer: it parses a
``%%stance`` cell's body while IPython transforms the cell, so that a syntax
error in it is IPython's own error before execution, shown as a plain cell
shows one (``Cell In[N], line L`` and the caret, no frames), with nothing of
the cell run.
"""

from __future__ import annotations

import ast
import inspect
import tokenize
import types
from typing import Any, Callable, TypeVar

from IPython.core.error import UsageError

__all__ = ["after_cell", "compile_cell", "syntax_checker"]


def compile_cell(shell: Any, cell: str, number: int) -> Callable[[], Any]:
    """Parse and compile ``cell`` as IPython does (raising SyntaxError now,
    before any stance is applied); return a function that runs it in the
    user namespace and gives the value of its last expression."""
    __tracebackhide__ = True
    plain = _PLAIN.get(cell)
    if plain is None:
        plain = _remember(_PLAIN, cell, not _needs_transform(cell))
    transformed = cell if plain else shell.transform_cell(cell)
    filename = shell.compile.cache(transformed, number, raw_code=cell)
    cacheable = not shell.ast_transformers
    key = (transformed, shell.compile.flags)
    cached = _COMPILED.get(key) if cacheable else None
    if cached is not None:
        # the same source compiled before, under another cell's file name
        code, code_last, body_awaits, last_awaits = cached
        code = _named(code, filename)
        if code_last is not None:
            code_last = _named(code_last, filename)
    else:
        # IPython asks this of the transformed cell too (its input_hist_parsed)
        code, code_last = _compile(shell, transformed, filename, _ends_with_semicolon(transformed))
        # Only code with a top-level await is awaited: a cell ending in a
        # call to an async def shows the coroutine object and runs nothing,
        # as a plain IPython cell does.
        body_awaits = bool(code.co_flags & _CO_COROUTINE)
        last_awaits = code_last is not None and bool(code_last.co_flags & _CO_COROUTINE)
        if cacheable:
            _remember(_COMPILED, key, (code, code_last, body_awaits, last_awaits))
    if body_awaits or last_awaits:
        _check_can_await()
    glob, loc = shell.user_global_ns, shell.user_ns

    def run() -> Any:
        __tracebackhide__ = True
        result = eval(code, glob, loc)
        if body_awaits:
            shell.loop_runner(result)
        if code_last is None:
            return None
        value = eval(code_last, glob, loc)
        if last_awaits:
            value = shell.loop_runner(value)
        return value

    return run


def syntax_checker(shell: Any) -> Callable[[list[str]], list[str]]:
    """An input transformer for IPython's ``input_transformers_cleanup``
    (lines in, the same lines out): a ``%%stance`` cell whose body does not
    parse raises the ``SyntaxError`` a plain cell of that body raises, named
    by the cell's ``In [N]`` and body line (as its tracebacks are). Marked as
    having side effects, so that IPython's completeness check (a terminal's
    "is this cell done?") leaves it out."""

    def check_stance_cell(lines: list[str]) -> list[str]:
        if (
            lines
            and lines[0].startswith(_MAGIC)
            and lines[0][len(_MAGIC) : len(_MAGIC) + 1] in _ENDS
        ):
            body = "".join(lines[1:])
            if body not in _PARSED:
                _check_syntax(shell, body)
                _remember(_PARSED, body, True)
        return lines

    check_stance_cell.has_side_effects = True  # type: ignore[attr-defined]
    return check_stance_cell


_MAGIC = "%%stance"
#: what may follow the magic's name on its line ("" for a line of its own)
_ENDS = frozenset(("", " ", "\t", "\n", "\r"))
#: bodies of %%stance cells that parsed (see syntax_checker)
_PARSED: dict[str, bool] = {}


def _check_syntax(shell: Any, cell: str) -> None:
    """Compile ``cell`` as :func:`compile_cell` will (its cache then holds
    the code: the cell is compiled once); a ``SyntaxError`` names the cell
    IPython is about to run (its file, as its traceback would). With IPython
    AST transformers (which may keep state), only Python's compile of the
    body: the magic transforms it when it runs."""
    number = shell.execution_count
    try:
        if not shell.ast_transformers:
            compile_cell(shell, cell, number)
            return
        transformed = cell if not _needs_transform(cell) else shell.transform_cell(cell)
        flags = shell.compile.flags | getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
        filename = shell.compile.cache(transformed, number, raw_code=cell)
        compile(transformed, filename, "exec", flags, True)
    except SyntaxError as err:
        setattr(err, _CHECKED, number)  # the cell's number (see after_cell)
        raise
    except Exception:
        pass  # not a syntax error: the magic raises it when the cell runs


#: on a SyntaxError the checker raised: the number of the cell it was for
_CHECKED = "_stance_magic_syntax_check"


def after_cell(shell: Any, result: Any) -> None:
    """The extension's ``post_run_cell`` part of the syntax check: IPython 8
    counts a cell whose input transform raised twice (its ``run_cell_async``
    adds 1 to ``execution_count``, then calls ``error_before_exec``, which
    adds 1 again: read in 8.39; 9.19 adds 1), so the next cell would be
    ``In [N+2]`` where a plain cell's syntax error gives ``In [N+1]``. Seen
    so (the count 2 past the cell's), the second is taken back."""
    err = getattr(result, "error_before_exec", None)
    number = getattr(err, _CHECKED, None)
    if isinstance(number, int) and shell.execution_count == number + 2:
        shell.execution_count -= 1


_CO_COROUTINE = inspect.CO_COROUTINE
#: Cells compiled so far: (transformed source, compiler flags) -> (the body's
#: code, the last expression's code or None, whether each awaits). Running a
#: cell again (the common case while experimenting) then costs no parse,
#: compile or tokenizing (IPython's semicolon check: about 7 µs).
_COMPILED: dict[tuple[str, int], tuple[types.CodeType, types.CodeType | None, bool, bool]] = {}
_COMPILED_MAX = 64
#: Whether a cell's source is plain Python (IPython's input transformers
#: would leave it as it is: see _needs_transform), per source
_PLAIN: dict[str, bool] = {}

_V = TypeVar("_V")


def _remember(cache: dict[Any, _V], key: Any, value: _V) -> _V:
    """``cache[key] = value``, the oldest entry dropped past _COMPILED_MAX."""
    if len(cache) >= _COMPILED_MAX:
        cache.pop(next(iter(cache)))
    cache[key] = value
    return value


def _compile(
    shell: Any, transformed: str, filename: str, semicolon: bool
) -> tuple[types.CodeType, types.CodeType | None]:
    """IPython's recipe: parse, transform the AST, split off the last
    expression, compile both parts (top-level ``await`` allowed)."""
    tree = shell.compile.ast_parse(transformed, filename=filename)
    tree = shell.transform_ast(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not semicolon:
        last = ast.Expression(tree.body.pop().value)
    # Top-level await compiles to a coroutine, as in a plain cell.
    with shell.compile.extra_flags(getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)):
        code = shell.compile(tree, filename, "exec")
        code_last = shell.compile(last, filename, "eval") if last is not None else None
    return code, code_last


def _named(code: types.CodeType, filename: str) -> types.CodeType:
    """``code`` (and the code of every function and class in it) under
    ``filename``: tracebacks and reports name the cell that runs it."""
    consts = code.co_consts
    for c in consts:
        if isinstance(c, types.CodeType):
            consts = tuple(
                _named(k, filename) if isinstance(k, types.CodeType) else k for k in consts
            )
            return code.replace(co_filename=filename, co_consts=consts)
    return code.replace(co_filename=filename)


#: Characters that start IPython syntax (magics, shell escapes, help,
#: autocall, prompts); a cell without them is plain Python.
_IPYTHON_SYNTAX = frozenset("%!?")
_LINE_ESCAPES = (",", ";", "/", ">>>", "...", "In [")


def _needs_transform(cell: str) -> bool:
    """Whether IPython's input transformers could change this cell.

    Plain Python (the usual %%stance cell) skips them: about 40 µs a cell.
    """
    if _IPYTHON_SYNTAX.intersection(cell) or cell[:1].isspace():
        return True
    return any(line.lstrip().startswith(_LINE_ESCAPES) for line in cell.splitlines())


def _ends_with_semicolon(cell: str) -> bool:
    """IPython's own test (by tokens: a trailing comment does not hide the ';')."""
    from IPython.core.displayhook import DisplayHook

    check = getattr(DisplayHook, "semicolon_at_end_of_expression", None)
    if check is not None:
        try:
            return bool(check(cell))
        except (tokenize.TokenError, SyntaxError):
            # an unclosed bracket, a bad dedent: the parse that follows
            # raises the SyntaxError a plain cell gives, with the user's line
            return False
    lines = [ln for ln in cell.rstrip().splitlines() if ln.strip()]  # pragma: no cover
    return bool(lines) and lines[-1].rstrip().endswith(";")


def _check_can_await() -> None:
    """An awaiting cell needs an event loop this magic can run; in a Jupyter
    kernel the cell already runs inside one, so a cell magic cannot."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(
        "%%stance cannot run a cell that awaits inside a running event loop (as in "
        "Jupyter): await in a plain cell, and call the compiled code under %%stance"
    )
