"""The public API is what it says.

* Every name of ``stance_magic.__all__`` resolves, the lazy ones through the
  package's ``__getattr__`` (PEP 562), and ``dir(stance_magic)`` lists them.
* A type checker sees every lazy name with its real type: ``__init__`` imports
  each under ``if TYPE_CHECKING:`` from the module ``__getattr__`` loads it from
  (``mypy`` in ``make lint`` then checks them).
* The public functions, and the public methods and properties of the public
  classes, say what they return, and it is not ``Any`` where a real type
  exists. The annotations are read as the strings they are (``from __future__
  import annotations``): nothing is evaluated, nothing heavy imported for it.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import stance_magic

INIT = Path(stance_magic.__file__)

#: Parameters that stay ``Any``: an IPython shell (IPython is not read by the
#: type checker), and ``measure()``'s deprecated keywords.
ANY_PARAMETERS = {
    ("load_ipython_extension", "ipython"),
    ("unload_ipython_extension", "ipython"),
    ("panel", "shell"),
    ("measure", "deprecated"),
}

#: Public methods that still return ``Any``, each with why.
ANY_RETURNS = {
    # report.py, being changed elsewhere: a matplotlib Figure
    ("CellReport", "figure"),
}


def _defined_here(name: str) -> bool:
    return getattr(getattr(stance_magic, name), "__module__", None) == "stance_magic"


def test_every_public_name_resolves():
    assert len(set(stance_magic.__all__)) == len(stance_magic.__all__)
    listed = dir(stance_magic)
    for name in stance_magic.__all__:
        value = getattr(stance_magic, name)
        assert name in listed, name
        if _defined_here(name):
            continue
        # a lazy name: __getattr__ hands on the module's own object
        assert stance_magic.__getattr__(name) is value, name
        assert value.__module__.startswith("stance_magic."), name
    try:
        stance_magic.__getattr__("no_such_name")
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def _type_checking_imports() -> dict[str, str]:
    """name -> module of the ``from .module import name as name`` lines under
    ``if TYPE_CHECKING:`` in ``__init__`` (``as name``: re-exported, PEP 484)."""
    out = {}
    for node in ast.parse(INIT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.level == 1 and imp.module:
                    for alias in imp.names:
                        if alias.asname == alias.name:
                            out[alias.name] = imp.module
    return out


def test_a_type_checker_sees_every_lazy_name():
    seen = _type_checking_imports()
    for name in stance_magic.__all__:
        if _defined_here(name):
            continue
        module = getattr(stance_magic, name).__module__.removeprefix("stance_magic.")
        assert seen.get(name) == module, (
            f"{name}: add `from .{module} import {name} as {name}` under "
            "`if TYPE_CHECKING:` in stance_magic/__init__.py"
        )
    # and the check reads such a line
    assert seen["Stance"] == "stance" and seen["panel"] == "widgets.panel"


def _returns(fn: Any) -> Any:
    return inspect.signature(fn).return_annotation


def test_public_functions_say_what_they_return():
    for name in stance_magic.__all__:
        fn = getattr(stance_magic, name)
        if isinstance(fn, type):
            continue
        sig = inspect.signature(fn)
        ret = sig.return_annotation
        assert ret is not inspect.Signature.empty, f"{name}() has no return annotation"
        assert "Any" not in ret, f"{name}() -> {ret}"
        for p in sig.parameters.values():
            assert p.annotation is not inspect.Parameter.empty, f"{name}({p.name})"
            if (name, p.name) not in ANY_PARAMETERS:
                assert p.annotation != "Any", f"{name}({p.name}: Any)"
    # what the issue asked for, word for word
    assert _returns(stance_magic.history) == "History[CellReport]"
    assert _returns(stance_magic.breaks) == "BreakList"
    assert _returns(stance_magic.bundle) == "str"
    assert _returns(stance_magic.set_session_stance) == "Stance"
    assert _returns(stance_magic.measure) == "ContextManager[Measured]"
    assert _returns(stance_magic.panel) == "StancePanel"
    assert _returns(stance_magic.get_engine) == "Engine"
    path = inspect.signature(stance_magic.bundle).parameters["path"].annotation
    assert path == "str | os.PathLike[str]"


def _public_members(cls: type) -> dict[str, Any]:
    out = {}
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            member = member.fget
        elif isinstance(member, (classmethod, staticmethod)):
            member = member.__func__
        if inspect.isfunction(member):
            out[name] = member
    return out


def test_public_classes_say_what_their_methods_return():
    from stance_magic.widgets.panel import StancePanel

    classes = [c for n in stance_magic.__all__ if isinstance(c := getattr(stance_magic, n), type)]
    classes.append(StancePanel)  # what panel() returns
    checked = 0
    for cls in classes:
        for name, fn in _public_members(cls).items():
            ret = _returns(fn)
            assert ret is not inspect.Signature.empty, f"{cls.__name__}.{name}"
            if (cls.__name__, name) not in ANY_RETURNS:
                assert ret != "Any", f"{cls.__name__}.{name} -> Any"
            checked += 1
    assert checked > 30
    assert _returns(stance_magic.Measured.report.fget) == "CellReport"
    assert _returns(StancePanel.session.fget) == "Stance"
