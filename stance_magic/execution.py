"""Running a cell's code as IPython does, for the ``%%stance`` cell magic.

:func:`compile_cell` follows IPython's own recipe (transform, parse, split off
the last expression, compile with the cell's ``In [N]`` file name), so that
tracebacks, ``In [N]`` names in reports and top-level ``await`` behave as
without the magic. A ``SyntaxError`` is raised here, before any stance is
applied.
"""

from __future__ import annotations

import ast
import inspect
import tokenize
import types
from typing import Any, Callable

from IPython.core.error import UsageError

__all__ = ["compile_cell"]


def compile_cell(shell: Any, cell: str, number: int) -> Callable[[], Any]:
    """Parse and compile ``cell`` as IPython does (raising SyntaxError now,
    before any stance is applied); return a function that runs it in the
    user namespace and gives the value of its last expression."""
    __tracebackhide__ = True
    transformed = shell.transform_cell(cell) if _needs_transform(cell) else cell
    filename = shell.compile.cache(transformed, number, raw_code=cell)
    # IPython asks this of the transformed cell too (its input_hist_parsed);
    # the answer depends on the source alone, so a cell run again is not
    # tokenized again (about 7 µs)
    semicolon = _SEMICOLON.get(transformed)
    if semicolon is None:
        semicolon = _ends_with_semicolon(transformed)
        if len(_SEMICOLON) >= _COMPILED_MAX:
            _SEMICOLON.pop(next(iter(_SEMICOLON)))
        _SEMICOLON[transformed] = semicolon
    key = (transformed, shell.compile.flags, semicolon)
    cached = None if shell.ast_transformers else _COMPILED.get(key)
    if cached is not None:
        # the same source compiled before, under another cell's file name
        code, code_last = (_named(c, filename) if c is not None else None for c in cached)
    else:
        code, code_last = _compile(shell, transformed, filename, key[2])
        if not shell.ast_transformers:
            if len(_COMPILED) >= _COMPILED_MAX:
                _COMPILED.pop(next(iter(_COMPILED)))
            _COMPILED[key] = (code, code_last)
    # Only code with a top-level await is awaited: a cell ending in a call
    # to an async def shows the coroutine object and runs nothing, as a
    # plain IPython cell does.
    body_awaits = bool(code.co_flags & inspect.CO_COROUTINE)
    last_awaits = code_last is not None and bool(code_last.co_flags & inspect.CO_COROUTINE)
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


#: Cells compiled so far: (source, compiler flags, ends with ";") -> (the
#: body's code, the last expression's code or None). Running a cell again
#: (the common case while experimenting) then costs no parse or compile.
_COMPILED: dict[tuple[str, int, bool], tuple[types.CodeType, types.CodeType | None]] = {}
_COMPILED_MAX = 64
#: _ends_with_semicolon's answer per transformed source (it reads the source alone)
_SEMICOLON: dict[str, bool] = {}


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
    consts = tuple(
        _named(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


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
