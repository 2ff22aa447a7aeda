"""A place in code is one value (:class:`stance_magic.place.Place`) with one
wording per form, and the report holds places, not their words."""

from __future__ import annotations

import ast
import dataclasses
import pickle
from pathlib import Path

import pytest

from stance_magic import place
from stance_magic.builder import called_from, frame_text
from stance_magic.place import Place, Worded
from stance_magic.report import Budget, Recompile

from conftest import last, run

PACKAGE = Path(__file__).resolve().parent.parent / "stance_magic"


def test_a_line_in_a_cell_and_in_a_file():
    assert Place(file="In [3]", line=2).where == "In [3], line 2"
    assert Place(file="In [3]").where == "In [3]"
    assert Place(file="torch/nn/modules/linear.py", line=125).where == (
        "torch/nn/modules/linear.py:125"
    )
    assert Place(file="pkg/mod.py").where == "pkg/mod.py"
    assert Place(name="f", line=3).where == ""  # no file: no place in words


def test_a_named_function():
    assert Place("f", "In [3]", 2).named == "f (In [3], line 2)"
    assert Place("f", "pkg/mod.py", 4).named == "f (pkg/mod.py:4)"
    assert Place("f", "pkg/mod.py").named == "f (pkg/mod.py)"
    # an unknown file: a question mark, or (label) the name alone
    assert Place("f").named == "f (?)"
    assert Place("f", line=4).named == "f (?:4)"
    assert Place("f").label == "f"
    assert Place("f", "In [3]", 2).label == "f (In [3], line 2)"
    assert place.label("f", "In [3], line 2") == "f (In [3], line 2)"
    assert place.label("f", "") == "f"


def test_a_frame_of_a_stack():
    assert Place("helper", "In [1]", 2).frame == "In [1], line 2 in helper"
    assert Place("fwd", "pkg/mod.py", 9).frame == "pkg/mod.py:9 in fwd"
    # a cell's own code by its line alone
    assert Place("<module>", "In [3]", 2).frame == "In [3], line 2"
    # the function always named
    assert Place("<module>", "In [3]", 2).within == "In [3], line 2 in <module>"


def test_a_line_with_its_source():
    p = Place(file="In [5]", line=8, source="print(y)")
    assert p.with_source == "In [5], line 8 `print(y)`"
    assert Place(file="In [5]", line=8).with_source == "In [5], line 8"
    assert place.with_source("In [5], line 8", "print(y)") == "In [5], line 8 `print(y)`"


def test_the_line_that_made_a_call():
    helper = Place("helper", "In [1]", 2)
    cell = Place("<module>", "In [3]", 2)
    assert place.called_from([cell]) == "In [3], line 2"
    assert place.called_from([helper, cell]) == "In [1], line 2 in helper, from In [3], line 2"
    # the notebook line is the outermost cell frame; library frames are no cells
    lib = Place("run", "pkg/mod.py", 7)
    outer = Place("<module>", "In [4]", 1)
    assert place.called_from([helper, lib, cell, outer]) == (
        "In [1], line 2 in helper, from In [4], line 1"
    )
    assert place.called_from([]) == ""
    # the builder's helpers word a stack the same way
    assert frame_text("helper", "/x/y.py", 2).endswith("y.py:2 in helper")
    assert called_from([]) == ""


def test_a_trace_label():
    assert Place(file="pkg/mod.py", line=4).path_line == "pkg/mod.py:4"
    assert Place().path_line == "?"


def test_a_worded_field_holds_a_place_and_reads_as_its_words():
    where = Place("f", "In [1]", 1)
    stack = [Place("helper", "In [1]", 2), Place("<module>", "In [3]", 2)]
    r = Recompile("n == 2", where, "0/1", called_from=stack, stack=stack)
    assert r.where == "f (In [1], line 1)"
    assert r.called_from == "In [1], line 2 in helper, from In [3], line 2"
    assert r.stack == ["In [1], line 2 in helper", "In [3], line 2"]
    assert place.of(r, "where") == where and place.of(r, "stack") == stack
    # exported as its words, under its own name
    assert dataclasses.asdict(r)["where"] == "f (In [1], line 1)"
    assert dataclasses.asdict(r)["stack"] == r.stack
    # copied and pickled with its places
    assert place.of(place.replace(r, reason="x"), "where") == where
    assert place.of(pickle.loads(pickle.dumps(r)), "called_from") == stack
    assert place.of(Recompile(**vars(r)), "stack") == stack
    # a place given in words (a report made by hand) reads as given
    b = Budget("f (In [1], line 1)", 7, 8, "recompile_limit")
    assert b.where == "f (In [1], line 1)" and place.of(b, "where") == b.where
    assert Recompile("r", "f", "0/1").stack == [] and Recompile("r", "f", "0/1").called_from == ""


def _places_of(obj) -> list[tuple[str, object]]:
    """Every Worded field of ``obj`` and the place it holds."""
    return [
        (f.name, place.of(obj, f.name))
        for f in dataclasses.fields(obj)
        if isinstance(type(obj).__dict__.get(f.name), Worded)
    ]


def _all_places(value) -> bool:
    if isinstance(value, list):
        return all(isinstance(v, Place) for v in value)
    return isinstance(value, Place)


def test_every_place_in_a_real_report_is_a_place(sh):
    sh.run_cell("import torch._dynamo")
    sh.run_cell("f = torch.compile(lambda x, n: x * n, backend='eager', dynamic=False)")
    sh.run_cell("def helper(g, n):\n    y = torch.ones(2)\n    return g(y, n)\n")
    sh.run_cell("f(torch.ones(2), 1)")
    res, _ = run(
        sh,
        "%%stance\n"
        "helper(f, 2)\n"
        "@torch.compile(backend='eager')\n"
        "def brk(x):\n"
        "    y = x.sin()\n"
        "    print('y', y.shape)\n"
        "    return y.cos()\n"
        "brk(torch.ones(3))",
    )
    assert res.error_in_exec is None
    rep = last(sh)
    assert rep.recompile_details and rep.graph_break_details and rep.recompile_budget
    n = rep.execution_count
    for r in rep.recompile_details:
        for name, value in _places_of(r):
            assert _all_places(value), (name, value)
        assert r.called_from == place.called_from(place.of(r, "stack"))
        assert " in helper, from In [" in r.called_from and r.called_from.endswith(", line 1")
    for b in rep.recompile_budget:
        assert isinstance(place.of(b, "where"), Place) and b.where == place.of(b, "where").label
    for t in rep.lookups.targets:
        assert isinstance(place.of(t, "where"), Place) and t.where == place.of(t, "where").where
    for f in rep.frames:
        assert isinstance(f.at, Place) and f.where == f.at.named
    (g,) = rep.graph_break_details
    assert isinstance(g.at, Place) and g.at.file == f"In [{n}]" and g.at.source
    assert g.place == g.at.with_source and g.where == g.at.where
    # exported as words, under the same keys
    d = rep.to_dict()
    assert d["recompile_details"][0]["where"] == rep.recompile_details[0].where
    assert d["recompile_details"][0]["stack"] == rep.recompile_details[0].stack
    assert isinstance(d["recompile_budget"][0]["where"], str)


def test_an_errors_place_is_its_stack(sh):
    sh.run_cell("fr = torch.compile(lambda x: x.cos(), backend='eager')")
    sh.run_cell("def helper(x):\n    return fr(x)\n")
    sh.run_cell("fr(torch.ones(2))")
    run(sh, "%%stance fail_on_recompile\nz = 1\nhelper(torch.ones(2, 2))")
    rep = last(sh)
    stack = place.of(rep, "error_where")
    assert _all_places(stack) and stack, stack
    assert rep.error_where == place.called_from(stack)
    assert rep.to_dict()["error_where"] == rep.error_where


#: The one module that words a line (``In [3], line 2``).
PLACE_MODULE = "place.py"


def _line_wordings(tree: ast.Module) -> list[int]:
    """Lines that build text holding ``, line `` (an f-string, a ``+`` or
    ``%`` of a string, a ``"…".format``): a place worded by hand."""

    def has(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (", line " in node.value)
        )

    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and any(has(v) for v in node.values):
            out.append(node.lineno)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            if has(node.left) or has(node.right):
                out.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and has(node.func.value)
        ):
            out.append(node.lineno)
    return out


def test_only_place_words_a_line():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel == PLACE_MODULE:
            continue
        lines = _line_wordings(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[rel] = lines
    assert found == {}
    # the check sees each way of wording one, and place.py's own
    assert _line_wordings(ast.parse('f"{loc}, line {n}"'))
    assert _line_wordings(ast.parse('loc + ", line " + str(n)'))
    assert _line_wordings(ast.parse('"%s, line %d" % (loc, n)'))
    assert _line_wordings(ast.parse('"{}, line {}".format(loc, n)'))
    assert not _line_wordings(ast.parse('"""A place: ``In [3], line 2``."""'))
    assert _line_wordings(ast.parse((PACKAGE / PLACE_MODULE).read_text(encoding="utf-8")))


@pytest.mark.parametrize("module", ["text", "place"])
def test_place_and_text_are_leaves(module):
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    imports = [
        n
        for n in ast.walk(tree)
        if (isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith("stance")))
        or (isinstance(n, ast.Import) and any(a.name.startswith("stance") for a in n.names))
    ]
    assert imports == []


def test_a_resume_functions_name_read_back():
    """A resume function is named by its graph break; any other name is
    answered without the regex (every window's budgets name their frames)."""
    from stance_magic.probe.frames import _describe_frame, resume_parts

    assert resume_parts("torch_dynamo_resume_in_forward_at_14") == ("forward", 14)
    assert resume_parts("torch_dynamo_resume_in_f_at_2_at_31") == ("f_at_2", 31)
    others = (
        "<lambda>",
        "forward",
        "",
        None,
        "torch_dynamo_resume_in_f",
        "x_torch_dynamo_resume_in_f_at_1",
    )
    for name in others:
        assert resume_parts(name) is None, name

    def f():
        return 1

    code = f.__code__.replace(co_name="torch_dynamo_resume_in_f_at_7")
    assert _describe_frame(code, None)[0] == "f after the graph break at line 7"
    assert _describe_frame(f.__code__, f)[0].endswith("f")
