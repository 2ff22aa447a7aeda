"""Dynamic shapes: the graph's inputs as Dynamo hands them to the backend,
their symbols, why each is dynamic, and the sizes the code specialized."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class GraphShapes:
    """The inputs of one graph as torch handed it to the backend: sizes with
    the symbols torch made (``s77``), why each is dynamic, and the sizes the
    code specialized (a symbol torch replaced by a number, with the guard and
    the user's line that did it)."""

    #: (input's source, its sizes): ``("L['x']", ["s77", "128"])``
    inputs: list[tuple[str, list[str]]] = field(default_factory=list)
    #: (symbol, its source, why it is dynamic)
    symbols: list[tuple[str, str, str]] = field(default_factory=list)
    #: (symbol, value, its source, torch's guard, the user's line)
    specialized: list[tuple[str, str, str, str, str]] = field(default_factory=list)


#: Why a dimension is dynamic, as the report says it.
WHY_MARKED = "mark_dynamic"
WHY_DYNAMIC_TRUE = "dynamic=True"
WHY_THEN_COMPILE = "inferred from the first calls (eager_then_compile)"
WHY_AUTOMATIC = "automatic dynamic: an earlier compile saw another size"


def _graph_shapes(og: Any, gm: Any, stance: str) -> GraphShapes:
    """What :class:`GraphShapes` holds, read from Dynamo's output graph and its
    shape environment just before the backend compiles it."""
    from torch._dynamo import config

    shapes = GraphShapes()
    env = getattr(og, "shape_env", None)
    marked: dict[str, set[int]] = {}
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value")
        arg = node.meta.get("grapharg")
        source = getattr(getattr(arg, "source", None), "name", None)
        source = source() if callable(source) else source
        if source is None or not hasattr(value, "shape"):
            continue
        shapes.inputs.append((str(source), [str(d) for d in value.shape]))
        try:
            real = arg.example
        except Exception:
            real = None
        marked[str(source)] = set(getattr(real, "_dynamo_dynamic_indices", ()) or ())
    if env is None:
        return shapes
    dynamic_true = getattr(config, "assume_static_by_default", True) is False
    sources = {str(k): [s.name() if callable(s.name) else s.name for s in v]
               for k, v in getattr(env, "var_to_sources", {}).items()}  # fmt: skip
    replaced = {str(k): str(v) for k, v in getattr(env, "replacements", {}).items()}
    for sym, srcs in sources.items():
        src = srcs[0] if srcs else ""
        if sym in replaced:
            if replaced[sym].lstrip("-").isdigit():
                guard, where = _specializing_guard(env, sym, replaced[sym])
                shapes.specialized.append((sym, replaced[sym], src, guard, where))
            continue
        base, dim = _size_source(src)
        if base is not None and dim in marked.get(base, ()):
            why = WHY_MARKED
        elif stance in ("eager_then_compile", "aot_eager_then_compile"):
            why = WHY_THEN_COMPILE
        elif dynamic_true:
            why = WHY_DYNAMIC_TRUE
        else:
            why = WHY_AUTOMATIC
        shapes.symbols.append((sym, src, why))
    return shapes


_SIZE_SOURCE = re.compile(r"^(?P<base>.+)\.size\(\)\[(?P<dim>\d+)\]$")


def _size_source(source: str) -> tuple[str | None, int]:
    m = _SIZE_SOURCE.match(source)
    return (m.group("base"), int(m.group("dim"))) if m else (None, -1)


def _specializing_guard(env: Any, sym: str, value: str) -> tuple[str, str]:
    """torch's guard that pinned ``sym`` to ``value`` and the user's line it
    came from (the shape environment's own record of where)."""
    wanted = {f"Eq({sym}, {value})", f"Eq({value}, {sym})"}
    for g in getattr(env, "guards", ()) or ():
        if str(g.expr) in wanted:
            loc = getattr(g.sloc, "maybe_user_loc", None) or ""
            return str(g.expr), str(loc)
    return f"Eq({sym}, {value})", ""
