"""The package's layout, read from its code with ``ast`` (nothing is imported).

* No import circle: every module import inside the package, at the top of a
  module or inside a function, is an edge; the graph without the one
  deliberate edge, ``report`` → ``render`` (a report's ``__str__`` and
  ``_repr_html_`` delegate to the views), has no cycle.
* The views (render, plots) do not import the engine.
* No module outside the probe reads a torch-private attribute
  (``torch._dynamo``, ``torch._C``, ``torch._inductor``, ...): each torch
  version difference has one home.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "stance_magic"

#: The one import circle the layout allows: (importer, imported).
ALLOWED = {("report", "render")}

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
    assert {"engine", "report", "render", "probe", "magics", "stance", "text"} <= set(graph)
    assert "probe" in graph["engine"] and "render" in graph["report"]
    assert "report" in graph["render"]  # so report <-> render is the one circle
    # the test would see a new circle
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_circle_but_report_to_render():
    graph = import_graph()
    for src, dst in ALLOWED:
        graph[src].discard(dst)
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def test_views_do_not_import_the_engine():
    graph = import_graph()
    for view in ("render", "plots", "text", "stance"):
        assert "engine" not in graph[view], view
    assert graph["text"] == set()  # a leaf


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


#: Private names one module may take from another (the extension restores
#: the stance from before its load through the engine's own apply).
PRIVATE_ALLOWED = {("_extension", "engine", "_apply")}


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
                if alias.name.startswith("_") and alias.name != "__future__":
                    for target in targets:
                        inside_probe = module.split(".")[0] == target.split(".")[0] == "probe"
                        if inside_probe:
                            continue  # the probe's modules share its private helpers
                        if (module, target, alias.name) not in PRIVATE_ALLOWED:
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
