"""The package's layout, read from its code with ``ast`` (nothing is imported).

* No import circle: every module import inside the package, at the top of a
  module, inside a function or under ``if TYPE_CHECKING:``, is an edge, and
  the graph has no cycle. The flow is one way: the front ends (magics, panel,
  ``measure()``) describe a block, the engine measures it, the builder makes
  the report, the views read it.
* The views (render, its hints among them, and plots) import neither the
  engine nor the report classes: reports reach them as data.
* Nothing but the builder writes a report's field.
* No module outside the probe reads a torch-private attribute
  (``torch._dynamo``, ``torch._C``, ``torch._inductor``, ...): each torch
  version difference has one home; IPython's internals have one home too
  (:mod:`stance_magic.notebook`), and paths are shortened in one place
  (:mod:`stance_magic.paths`). A gather across ranks reaches
  ``torch.distributed`` through the probe too.
* No private name crosses a module boundary: not imported, not read as an
  attribute (``probe._x``), not handed on by a package's ``__init__``.
"""

from __future__ import annotations

import ast
import functools
import itertools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "stance_magic"

#: Where torch's private attributes may be read.
PROBE = ("probe",)


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts) or "__init__"
        out[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return out


def _resolve(module: str, node: ast.ImportFrom, names: set[str]) -> list[str]:
    """The package modules an ``import from`` names (``from . import probe``
    names ``probe``; ``from .report import CellReport`` names ``report``)."""
    if node.level == 0:
        base = (node.module or "").split(".")
        if base[0] != "stance_magic":
            return []
        base = base[1:]
    else:
        here = module.split(".")[:-1] if module != "__init__" else []
        if module in names and any(n.startswith(module + ".") for n in names):
            here = module.split(".")  # a package's __init__
        up = node.level - 1
        base = (here[: len(here) - up] if up else here) + (
            node.module.split(".") if node.module else []
        )
    found = []
    target = ".".join(base)
    for alias in node.names:
        sub = f"{target}.{alias.name}" if target else alias.name
        if sub in names:
            found.append(sub)
        elif target in names:
            found.append(target)
    if not node.names and target in names:
        found.append(target)
    return found


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    names = set(mods)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, tree in mods.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                targets = _resolve(module, node, names)
            elif isinstance(node, ast.Import):
                targets = [
                    a.name.removeprefix("stance_magic.")
                    for a in node.names
                    if a.name.startswith("stance_magic.")
                ]
            else:
                continue
            graph[module].update(t for t in targets if t != module and t in names)
    # The package's lazy attributes (PEP 562) are imports too.
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_graph_is_read_from_the_code():
    graph = import_graph()
    assert {"session.engine", "report", "render", "probe", "frontend.magics", "stance"} <= set(
        graph
    )
    assert "probe" in graph["session.engine"] and "render" in package_graph()["report"]
    assert "report" in package_graph()["builder"] and "builder" in graph["session.measurement"]
    # the test would see a new circle, a type-only import included
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b")
    assert any(isinstance(n, ast.ImportFrom) and n.level == 1 for n in ast.walk(tree))


def test_no_import_circle():
    graph = import_graph()
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def _top(module: str) -> str:
    """The module, or the package it is part of (``render.labels`` → ``render``)."""
    return module.split(".")[0]


def package_graph() -> dict[str, set[str]]:
    """The import graph with every package folded into one node: what
    ``render`` imports is what any of ``render``'s modules imports."""
    out: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        out.setdefault(_top(module), set()).update(
            _top(t) for t in targets if _top(t) != _top(module)
        )
    return out


def test_the_flow_is_one_way():
    """Front ends (the magics, the panel) → the session (engine, measurement)
    → the builder → the report; the views read reports and import neither the
    session nor the report classes; the packages, folded, have no circle."""
    graph = package_graph()
    order = ["frontend", "session", "builder", "report"]
    for upper, lower in itertools.pairwise(order):
        assert lower in graph[upper], (upper, lower)
    assert "session" in graph["widgets"]
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])
    for view in ("render", "plots", "text", "stance"):
        assert not {"session", "builder", "report"} & graph[view], view
    # the words come from the report alone: an exported or gathered report
    # reads the same in any process, whatever torch it has
    for view in ("render", "text"):
        assert "probe" not in graph[view], view
    # the words are made from the report alone: render reads no builder
    assert "builder" not in graph["render"]
    assert graph["text"] == set()  # a leaf
    # render's hints name a recompile by its kind (causes.py): causes reads
    # torch's guard text through the probe's message parsers and nothing else
    assert "causes" in graph["render"] and graph["causes"] == {"probe"}
    assert graph["notebook"] == set()  # IPython's one home imports nothing of ours


#: The attribute names of a report and its parts (read from report.py).
def _report_fields() -> set[str]:
    trees = [t for m, t in _modules().items() if _top(m) == "report"]
    out: set[str] = set()
    for node in (n for tree in trees for n in tree.body):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    out.add(item.target.id)
    return out


_MUTATORS = {"append", "extend", "insert", "update", "clear", "pop", "remove", "setdefault"}


def _report_writes(tree: ast.Module, fields: set[str]) -> list[str]:
    """``x.<field> = …``, ``x.<field> += …`` and ``x.<field>.append(…)`` with
    ``x`` not ``self`` (nor ``shell``, IPython's own, whose
    ``execution_count`` the extension corrects): a write into something
    shaped like a report."""
    out = []

    def receiver_is_exempt(node: ast.Attribute) -> bool:
        root = node.value
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        return isinstance(root, ast.Name) and root.id in ("self", "cls", "shell")

    def flat(t: ast.expr) -> list[ast.expr]:
        if isinstance(t, (ast.Tuple, ast.List)):
            return [x for e in t.elts for x in flat(e)]
        if isinstance(t, ast.Starred):
            return flat(t.value)
        if isinstance(t, ast.Subscript):  # rep.eager_calls["x"] = 1
            return [t.value]
        return [t]

    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in (x for target in targets for x in flat(target)):
            if isinstance(t, ast.Attribute) and t.attr in fields and not receiver_is_exempt(t):
                out.append(f"line {node.lineno}: … .{t.attr} =")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr in fields
            and not receiver_is_exempt(node.func.value)
        ):
            out.append(f"line {node.lineno}: … .{node.func.value.attr}.{node.func.attr}(…)")
    return out


def test_only_the_builder_writes_a_report():
    """A report is made whole by :mod:`stance_magic.builder` and read by
    everyone else: no other module assigns to a report's field or grows one
    of its lists (the probe, which never sees a report, keeps its own
    records)."""
    fields = _report_fields()
    assert {"notes", "lookups", "execution_count", "compare", "ranks", "shared"} <= fields
    found = {
        module: writes
        for module, tree in _modules().items()
        if _top(module) not in ("builder", "report", "probe")
        and (writes := _report_writes(tree, fields))
    }
    assert found == {}
    # the check sees such writes
    assert _report_writes(ast.parse("rep.notes.append('x')"), fields)
    assert _report_writes(ast.parse("m.report.execution_count = 3"), fields)
    assert not _report_writes(ast.parse("self.notes = []"), fields)
    assert not _report_writes(ast.parse("shell.execution_count -= 1"), fields)
    assert _report_writes(ast.parse("rep.execution_count -= 1"), fields)


def _reads_of(tree: ast.Module, names: set[str]) -> list[str]:
    """Attribute reads and string constants naming one of ``names``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names:
            out.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in names:
            out.append(f"line {node.lineno}: {node.value!r}")
    return out


def test_ipython_internals_and_paths_have_one_home_each():
    """IPython's cell file map, the kernel's message header and the extension
    manager are read in :mod:`stance_magic.notebook` alone; site-packages and
    the other path prefixes are shortened in :mod:`stance_magic.paths` alone."""
    homes = {
        "notebook": {"_filename_map", "get_parent", "extension_manager", "reload_extension"},
        "paths": {"getsitepackages", "getusersitepackages"},
    }
    mods = _modules()
    for home, names in homes.items():
        assert _reads_of(mods[home], names), home
        found = {
            m: reads
            for m, tree in mods.items()
            if m != home and m.split(".")[0] != "probe" and (reads := _reads_of(tree, names))
        }
        assert found == {}, home


def _private_torch_reads(tree: ast.Module) -> list[str]:
    out = []
    for node in ast.walk(tree):
        dunder = node.attr.startswith("__") if isinstance(node, ast.Attribute) else False
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not dunder:
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id == "torch":
                out.append(f"line {node.lineno}: torch…{node.attr}")
        elif isinstance(node, ast.Import):
            out += [
                f"line {node.lineno}: import {a.name}"
                for a in node.names
                if a.name.startswith("torch.") and "._" in "." + a.name.split(".", 1)[1]
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mod = node.module
            if mod.startswith("torch") and (
                "._" in mod or any(a.name.startswith("_") for a in node.names)
            ):
                out.append(f"line {node.lineno}: from {mod} import …")
    return out


def test_torch_private_attributes_only_in_the_probe():
    found = {
        module: reads
        for module, tree in _modules().items()
        if module.split(".")[0] not in PROBE and (reads := _private_torch_reads(tree))
    }
    assert found == {}
    # the check sees a private read
    assert _private_torch_reads(ast.parse("import torch\ntorch._dynamo.reset()"))
    assert _private_torch_reads(ast.parse("from torch._dynamo import config"))
    assert not _private_torch_reads(ast.parse("import torch.distributed as d"))


def _distributed_imports(tree: ast.Module) -> list[str]:
    """``import torch.distributed``, ``from torch.distributed import …`` and
    ``from torch import distributed``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        if any(n == "torch.distributed" or n.startswith("torch.distributed.") for n in names):
            out.append(f"line {node.lineno}: torch.distributed")
    return out


def test_the_process_group_is_reached_through_the_probe():
    """A gather across ranks (the builder's report, the session's stances)
    reaches torch.distributed through :mod:`stance_magic.probe.distributed`
    alone, as every other use of torch goes through the probe."""
    mods = _modules()
    assert _distributed_imports(mods["probe.distributed"])
    found = {
        module: imports
        for module, tree in mods.items()
        if _top(module) not in PROBE and (imports := _distributed_imports(tree))
    }
    assert found == {}
    # the check sees each form
    for code in ("import torch.distributed as d", "from torch import distributed"):
        assert _distributed_imports(ast.parse(code)), code


def _module_aliases(module: str, tree: ast.Module, names: set[str]) -> dict[str, str]:
    """Local names bound to a package module (``from . import probe``,
    ``from .probe import caches as pc``)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for target, alias in zip(_resolve(module, node, names), node.names):
                if target.endswith(alias.name) and target in names:
                    out[alias.asname or alias.name] = target
    return out


def _one_package(module: str, target: str) -> bool:
    """Both modules inside one package (``probe.recorder.hooks`` and
    ``probe.records``; ``render.rows`` and ``render``): its modules share its
    private helpers."""
    return _top(module) == _top(target) and _top(module) in _packages()


@functools.cache
def _packages() -> frozenset[str]:
    return frozenset(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def _private_attribute_reads(module: str, tree: ast.Module, names: set[str]) -> list[str]:
    """``mod._x`` (a private name of another module, read as an attribute)
    and ``probe.sub.X`` (a probe module's name not handed on by its face)."""
    aliases = _module_aliases(module, tree, names)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name):
            continue
        target = aliases.get(node.value.id)
        if target is None or target == module or _one_package(module, target):
            continue
        if node.attr.startswith("_") and not node.attr.startswith("__"):
            out.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
        elif (
            f"{target}.{node.attr}" in names
            and target == "probe"
            and module.split(".")[0] != "probe"
        ):
            out.append(f"line {node.lineno}: {node.value.id}.{node.attr} (a probe module)")
    return out


def test_no_private_helpers_read_across_modules():
    mods = _modules()
    names = set(mods)
    found = {
        m: reads for m, tree in mods.items() if (reads := _private_attribute_reads(m, tree, names))
    }
    assert found == {}
    # the check sees both kinds
    tree = ast.parse("from . import probe\nprobe._torch_str()\nprobe.monitoring.X")
    assert len(_private_attribute_reads("compare", tree, names)) == 2


def test_no_private_names_handed_on():
    """A package's face (``__init__``) hands on public names only."""
    for module, tree in _modules().items():
        if module not in ("__init__", "probe", "share"):
            continue
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                assert not [
                    a.name
                    for a in node.names
                    if a.name.startswith("_")
                    and a.name != "annotations"
                    and not a.name.startswith("__")
                ], module


def test_no_private_helpers_imported_across_modules():
    mods = _modules()
    names = set(mods)
    found = []
    for module, tree in mods.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            targets = _resolve(module, node, names)
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    for target in targets:
                        if _one_package(module, target):
                            continue  # a package's modules share its private helpers
                        found.append(f"{module} imports {target}.{alias.name}")
    assert found == []


def _record_field_reads(tree: ast.Module, fields: set[str]) -> list[str]:
    """``getattr(x, "<a CompilationMetrics field>", …)`` calls: a torch record
    read field by field."""
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in fields
        ):
            out.append(f"line {node.lineno}: getattr(…, {node.args[1].value!r})")
    return out


def test_torch_compile_records_are_read_only_in_the_probe():
    """The report consumes ``probe.CompileRecord``s (``window.compiles``): no
    module outside the probe reads torch's ``CompilationMetrics`` fields."""
    import dataclasses

    from torch._dynamo.utils import CompilationMetrics

    fields = {f.name for f in dataclasses.fields(CompilationMetrics)}
    assert {"compile_id", "recompile_reason", "fail_type", "co_name"} <= fields
    found = {
        module: reads
        for module, tree in _modules().items()
        if module.split(".")[0] not in PROBE and (reads := _record_field_reads(tree, fields))
    }
    assert found == {}
    # the check sees such a read
    assert _record_field_reads(ast.parse("getattr(rec, 'fail_type', None)"), fields)


#: The most lines a module and a class may have: a file is read whole, a
#: class is one concern.
MODULE_LINES = 700
CLASS_LINES = 400
#: ... and a function (its docstring included): the recorder's per-call hook
#: factory (calls._hooks_for, 125 lines of closures torch calls on every
#: compiled call) is the longest, and stays one function for speed.
FUNCTION_LINES = 130


def _sizes() -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    modules, classes, functions = {}, {}, {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        text = path.read_text(encoding="utf-8")
        modules[rel] = text.count("\n") + (not text.endswith("\n"))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                classes[f"{rel}:{node.name}"] = node.end_lineno - node.lineno + 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[f"{rel}:{node.name}:{node.lineno}"] = node.end_lineno - node.lineno + 1
    return modules, classes, functions


def test_no_module_class_or_function_too_long():
    modules, classes, functions = _sizes()
    assert {m: n for m, n in modules.items() if n > MODULE_LINES} == {}
    assert {c: n for c, n in classes.items() if n > CLASS_LINES} == {}
    assert {f: n for f, n in functions.items() if n > FUNCTION_LINES} == {}
    assert modules["__init__.py"] > 0 and classes and functions  # the count sees the code


def _whole_classes() -> dict[str, int]:
    """Each class's lines together with those of its bases defined in the
    package (its mixins), each base counted once: a class split into
    mixins that share its state is one class."""
    bodies: dict[str, tuple[str, int, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [
                    b.id if isinstance(b, ast.Name) else b.attr
                    for b in node.bases
                    if isinstance(b, (ast.Name, ast.Attribute))
                ]
                size = node.end_lineno - node.lineno + 1
                bodies.setdefault(node.name, (f"{rel}:{node.name}", size, bases))

    def family(name: str, seen: set[str]) -> set[str]:
        if name in seen or name not in bodies:
            return seen
        seen.add(name)
        for base in bodies[name][2]:
            family(base, seen)
        return seen

    return {
        where: sum(bodies[n][1] for n in family(name, set()))
        for name, (where, _, _) in bodies.items()
    }


#: Classes over CLASS_LINES once their mixins are counted with them, each with
#: what is left to do (issue 51: parts that own their state). The list only
#: shrinks: a class split into collaborators fails the test until it is taken
#: off, and a new one over the limit fails it at once.
WHOLE_CLASSES_OVER = {
    "probe/recorder/core.py:Recorder": "the recorder: a core and 8 mixins sharing its slots",
}


def test_no_class_is_too_long_with_its_mixins():
    whole = _whole_classes()
    over = {c for c, n in whole.items() if n > CLASS_LINES}
    assert over == set(WHOLE_CLASSES_OVER), (
        f"over {CLASS_LINES} lines with their mixins: {sorted(over - set(WHOLE_CLASSES_OVER))}; "
        f"no longer over (take them off the list): {sorted(set(WHOLE_CLASSES_OVER) - over)}"
    )
    # the panel is one class whose parts are objects it holds, not its bases
    assert whole["widgets/panel.py:StancePanel"] <= CLASS_LINES
    assert whole["probe/recorder/core.py:Recorder"] > 1000  # the count sees the mixins


#: Modules outside the probe that may use regular expressions, and on what:
#: none of them reads torch's messages (that is :mod:`stance_magic.probe`'s
#: job, so a new torch's wording is a change in one place).
REGEX_OUTSIDE_THE_PROBE = {
    "paths": "path prefixes in any text",
    "share.bundling": "the file numbers in a Perfetto trace",
    "render.links": "URLs in a hint, made into links",
}


def test_torch_messages_are_parsed_only_in_the_probe():
    found = set()
    for module, tree in _modules().items():
        if _top(module) == "probe":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "re" for a in node.names):
                found.add(module)
            elif isinstance(node, ast.ImportFrom) and node.module == "re":
                found.add(module)
    assert found <= set(REGEX_OUTSIDE_THE_PROBE), found - set(REGEX_OUTSIDE_THE_PROBE)


#: What stays at the package's top: its face, the values every layer reads
#: (a stance, a spec, a place, text), the recompile causes (the builder and
#: render's hints read them; render may import neither the builder nor the
#: probe), IPython's one home and the files' (their names as a reader knows
#: them, a file written whole).
#: A new module goes into the package of its role; this list grows only on
#: purpose.
TOP_MODULES = {
    "__init__",
    "_version",
    "causes",
    "notebook",
    "paths",
    "place",
    "spec",
    "stance",
    "text",
}
#: The packages, by role: who may import each (``None``: anyone).
PACKAGES = {
    "frontend": {"__init__"},  # the IPython front end: the magics, their commands and help
    "widgets": {"__init__", "frontend"},  # the panel
    "session": {"__init__", "frontend", "widgets"},  # engine, cells, measurement
    "builder": None,  # a closed window → the whole report
    "report": None,  # the report's dataclasses
    "render": None,  # the report's words, tables, HTML
    "probe": None,  # torch: hooks, records, versions
    "share": None,  # --trace, --timeline, the bundle
    "plots": None,  # the charts, a module per view
}


def test_the_top_level_shows_the_layers():
    graph = package_graph()
    top = {m for m in graph if m not in PACKAGES}
    assert top == TOP_MODULES, (
        f"new at the top: {sorted(top - TOP_MODULES)}; gone: {sorted(TOP_MODULES - top)}"
    )
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages == set(PACKAGES), packages ^ set(PACKAGES)
    for package, allowed in PACKAGES.items():
        if allowed is None:
            continue
        importers = {m for m, targets in graph.items() if package in targets}
        assert importers <= allowed, (package, sorted(importers - allowed))
    # the session and everything under it import no IPython (the engine runs
    # in any Python; IPython is the front end's, and notebook.py's)
    for module, tree in _modules().items():
        if _top(module) in ("session", "builder", "report", "render", "probe"):
            imported = {
                (n.module or "").split(".")[0]
                if isinstance(n, ast.ImportFrom)
                else a.name.split(".")[0]
                for n in ast.walk(tree)
                if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names
            }
            assert not {"IPython", "ipywidgets"} & imported, module
