"""From counts to causes: every guard that failed in a recompile (and the
hint that follows the one that matters), the recompile budget, the notebook's
own recompile traps, graph breaks and dynamic dimensions, each checked
against a real recompile of its kind and torch's own ``recompiles`` log
records (the guard text the cause is read from), and the code object's
cache entries (the budget)."""

from __future__ import annotations

import logging
import re

import pytest
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

from stance_magic import causes
from stance_magic.render import break_todo

from conftest import (
    GRAPH_BREAKS_LOGGER,
    RECOMPILES_LOGGER,
    SHAPES_LOGGER,
    last,
    run,
    torch_log,
)


@pytest.fixture
def torch_recompiles():
    """torch's own recompiles log records (TORCH_LOGS=recompiles)."""
    with torch_log(RECOMPILES_LOGGER, recompiles=True) as handler:
        yield handler.messages


def measured(sh, setup: str, cell: str):
    sh.run_cell(setup)
    res, _ = run(sh, "%%stance default -q\n" + cell)
    assert res.success, res.error_in_exec
    return last(sh)


def only_cause(rep, torch_messages):
    (c,) = rep.causes
    # the guard the cause was read from is one torch logged for this recompile
    guard = c.guard.split("  ← ")[0].split(": ", 1)[1]
    assert any(guard in m for m in torch_messages), (guard, torch_messages)
    return c


def test_a_class_redefined_by_rerunning_its_cell(sh, torch_recompiles):
    sh.run_cell(
        "class Net(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x.relu()\n"
        "step = torch.compile(lambda m, x: m(x), backend='eager')\n"
        "old = Net\n"
        "step(Net(), torch.ones(2))\n",
        store_history=True,
    )
    rep = measured(
        sh,
        "",
        "class Net(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x.relu()\n"
        "step(Net(), torch.ones(2))",
    )
    assert sh.user_ns["old"] is not sh.user_ns["Net"]  # a new class object
    c = only_cause(rep, torch_recompiles)
    assert c.kind == "redefined" and c.subject == "Net"
    number = rep.execution_count
    assert f"since In [{number}]" in c.what and "torch.compiler.reset()" in c.fix


def test_a_helper_function_redefined(sh, torch_recompiles):
    sh.run_cell(
        "def helper(x):\n    return x + 1\n"
        "@torch.compile(backend='eager')\n"
        "def g(x):\n    return helper(x) * 2\n"
        "g(torch.ones(2))\n",
        store_history=True,
    )
    rep = measured(sh, "", "def helper(x):\n    return x + 1\ng(torch.ones(2))")
    c = only_cause(rep, torch_recompiles)
    assert c.kind == "redefined" and c.subject == "helper" and "new function" in c.what


def test_recreating_a_compiled_module_is_not_a_trap(sh):
    sh.run_cell(
        "x = torch.ones(2, 4)\nmodel = torch.nn.Linear(4, 4)\n"
        "cm = torch.compile(model, backend='eager')\ncm(x)"
    )
    rep = measured(
        sh, "", "model = torch.nn.Linear(4, 4)\ncm = torch.compile(model, backend='eager')\ncm(x)"
    )
    # torch guards modules by type and parameters: the new model hits the cache
    assert rep.cache_hits == 1 and rep.compiles == 0
    assert rep.causes == [] and rep.recompiles == []


@pytest.mark.parametrize(
    ("name", "setup", "cell", "kind", "words"),
    [
        (
            "lr",
            "@torch.compile(backend='eager')\ndef upd(p, lr):\n    return p - lr * p\n"
            "upd(torch.ones(2), 0.1)",
            "upd(torch.ones(2), 0.05)",
            "value",
            ("Python float", "torch.tensor(lr)"),
        ),
        (
            "step",
            "@torch.compile(backend='eager', dynamic=False)\ndef sched(p, step):\n"
            "    return p * step\nsched(torch.ones(2), 1)",
            "sched(torch.ones(2), 2)",
            "value",
            ("Python int", "dynamic=True"),
        ),
        (
            "LR",
            "LR = 0.1\n@torch.compile(backend='eager')\ndef upd2(p):\n    return p - LR * p\n"
            "upd2(torch.ones(2))",
            "LR = 0.05\nupd2(torch.ones(2))",
            "value",
            ("global `LR`", "as a tensor"),
        ),
        (
            "DEBUG",
            "DEBUG = False\n@torch.compile(backend='eager')\ndef h(x):\n    if DEBUG:\n"
            "        return x + 1\n    return x - 1\nh(torch.ones(2))",
            "DEBUG = True\nh(torch.ones(2))",
            "flag",
            ("global flag `DEBUG`", "argument"),
        ),
        (
            "cfg.scale",
            "class Cfg:\n    scale = 2\ncfg = Cfg()\n@torch.compile(backend='eager')\ndef h2(x):\n"
            "    return x * cfg.scale\nh2(torch.ones(2))",
            "cfg.scale = 3\nh2(torch.ones(2))",
            "attribute",
            ("`scale` of `cfg`",),
        ),
        (
            "grad mode",
            "lin = torch.nn.Linear(2, 2)\n@torch.compile(backend='eager')\ndef fw(x):\n"
            "    return lin(x)\nfw(torch.ones(2))",
            "with torch.no_grad():\n    fw(torch.ones(2))",
            "grad mode",
            ("torch.no_grad()",),
        ),
        (
            "x",
            "@torch.compile(backend='eager')\ndef dt(x):\n    return x * 2\ndt(torch.ones(2))",
            "dt(torch.ones(2, dtype=torch.float64))",
            "dtype",
            ("dtype", "graph of its own"),
        ),
        (
            "x",
            "@torch.compile(backend='eager')\ndef rg(x):\n    return x * 2\nrg(torch.ones(2))",
            "rg(torch.ones(2, requires_grad=True))",
            "requires_grad",
            ("requires_grad",),
        ),
        (
            "x",
            "@torch.compile(backend='eager')\ndef rk(x):\n    return x * 2\nrk(torch.ones(2))",
            "rk(torch.ones(2, 2))",
            "rank",
            ("rank",),
        ),
        (
            "x",
            "@torch.compile(backend='eager')\ndef sz(x):\n    return x * 2\nsz(torch.ones(2))",
            "sz(torch.ones(3))",
            "size",
            ("mark_dynamic(x, 0)", "2 → 3"),
        ),
    ],
    ids=["float-arg", "int-arg", "global-float", "global-flag", "config-attr", "grad-mode",
         "dtype", "requires-grad", "rank", "size"],
)  # fmt: skip
def test_each_trap_from_a_real_recompile(sh, torch_recompiles, name, setup, cell, kind, words):
    rep = measured(sh, setup, cell)
    assert len(rep.recompiles) == len(torch_recompiles) == 1
    c = only_cause(rep, torch_recompiles)
    assert c.kind == kind and c.subject == name
    text = str(c)
    for w in words:
        assert w in text, (w, text)
    assert "why it recompiled" in rep.text(verbose=True)


def test_an_unknown_guard_is_not_guessed():
    assert causes.identify("0/0: ___some_new_guard(L['x'], 3)") is None
    assert causes.identify("0/0: ___check_obj_id(G['torch'].nn, 1)", {}) is None


def test_recompile_budget_against_the_cache_entries(sh):
    old = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 4
    try:
        sh.run_cell(
            "def body(x, n):\n    return x * n\n"
            "f = torch.compile(body, backend='eager', dynamic=False)\nf(torch.ones(2), 0)\n"
        )
        rep = measured(sh, "", "f(torch.ones(2), 1)\nf(torch.ones(2), 2)")
        code = sh.user_ns["body"].__code__
        entries = len(_debug_get_cache_entry_list(code))  # independent: torch's cache
        assert entries == 3
        (b,) = rep.recompile_budget
        assert b.entries == entries and b.limit == 4 and b.config == "recompile_limit"
        assert b.left == 1 and b.near
        assert "3 of 4 entries" in str(rep) and "1 left" in str(rep)
        assert any("the next recompile is its last" in h for h in rep.advice())
        assert rep.summary_row()["budget"] == "3/4"
        # a cell that only looks the frame up still shows it, across cells
        rep = measured(sh, "", "f(torch.ones(2), 1)")
        (b,) = rep.recompile_budget
        assert b.entries == 3 and rep.compiles == 0
        hist = str(sh.user_ns["stance_magic"].history())
        assert "budget" in hist.splitlines()[0] and "3/4" in hist
    finally:
        torch._dynamo.config.recompile_limit = old


CHATTY = """
class Chatty(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
    def forward(self, x):
        y = self.lin(x)
        print("y:", y.shape)
        if y.sum() > 0:
            y = y.relu()
        return y * 2
chatty = torch.compile(Chatty(), backend='eager')
"""


def test_graph_break_todo_list_against_torch_logs_and_registry(sh):
    import json
    import os

    registry = json.load(
        open(os.path.join(os.path.dirname(torch.__file__), "_dynamo", "graph_break_registry.json"))
    )
    sh.run_cell(CHATTY, store_history=True)
    with torch_log(GRAPH_BREAKS_LOGGER, graph_breaks=True) as handler:
        res, cap = run(
            sh, "%%stance default --no-plot\nfor _ in range(2):\n    chatty(torch.randn(2, 4))"
        )
    assert res.success
    rep = last(sh)
    logged = handler.messages  # torch's own graph_breaks records
    assert sum(g.count for g in rep.graph_break_details) == len(logged) == 2
    by_source = {g.source: g for g in rep.graph_break_details}
    printing, branching = by_source['print("y:", y.shape)'], by_source["if y.sum() > 0:"]
    assert printing.gb_id == "GB0059"  # in every registry from 2.8 on
    for g in (printing, branching):
        if not g.gb_id:
            continue  # a break this torch's registry does not list (2.8's branching)
        entry = registry[g.gb_id]  # torch's registry knows the id we read
        assert entry[0]["Gb_type"] == g.gb_type
        page = f"/gb/{g.gb_id.lower()}.html"
        linked = [m for m in logged if page in m]
        if linked:  # torch's message links the page (2.13): the report has that link
            assert any(g.url and g.url in m for m in linked)
        elif g.url:  # else from torch's own link function (2.10), or none (2.8)
            assert g.url.endswith(page)
        assert g.hints and all(any(h in m for m in logged) for h in g.hints)
    assert printing.gb_type == "Failed to trace builtin operator"
    assert branching.summary.startswith("Data-dependent branching")
    # cost: the resume functions torch compiled after each break (its records)
    tail = f"graph break at line {branching.line}"
    after = [f for f in rep.frames if f.name.endswith(tail)]
    assert branching.frames_after == len(after) >= 1
    assert branching.compile_s_after == pytest.approx(sum(f.seconds for f in after))
    costs = [g.compile_s_after for g in rep.graph_break_details]
    assert costs == sorted(costs, reverse=True)  # most costly first
    text = str(rep)
    assert printing.url in text and "hint:" in text
    if not printing.url:
        return  # no documentation links in this torch: the rest needs them
    # the session-wide list: both cells' breaks, grouped, counted
    sh.run_cell("torch.compiler.reset()")  # compiled anew: torch breaks (and logs) again
    run(sh, "%%stance default -q\nchatty(torch.randn(2, 4))")
    res, cap = run(sh, "%stance breaks")
    assert res.success
    bl = sh.user_ns["stance_magic"].breaks()
    assert len(bl) == 2 and {b.count for b in bl} == {2}
    assert all(len(b.cells) == 2 for b in bl)
    assert "docs:" in str(bl) and "<a href=" in bl._repr_html_()
    data = rep.to_dict()["graph_break_details"][0]
    assert data["gb_id"] and data["url"] and data["hints"]


def test_a_break_inside_library_code_names_the_users_line(sh, tmp_path, monkeypatch):
    # a "library": a module under a site-packages folder the report treats as such
    import site

    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "fakelib.py").write_text(
        "import torch\n\ndef noisy(x):\n    print('library says hi')\n    return x + 1\n"
    )
    monkeypatch.syspath_prepend(str(lib))
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(lib)])
    sh.run_cell(
        "import fakelib\n"
        "@torch.compile(backend='eager')\n"
        "def mine(x):\n"
        "    y = x.sin()\n"
        "    y = fakelib.noisy(y)\n"
        "    return y.cos()\n",
        store_history=True,
    )
    run(sh, "%%stance default -q\nmine(torch.ones(2))")
    (g,) = last(sh).graph_break_details
    assert g.filename.endswith("fakelib.py") and g.line == 4
    assert g.user_where.startswith("In [") and g.user_where.endswith("line 5")
    assert g.user_source == "y = fakelib.noisy(y)"
    assert "inside fakelib.py:4" in break_todo(g)


def created(messages: list[str]) -> dict[str, str]:
    """symbol -> source, from torch's create_symbol records."""
    out = {}
    for m in messages:
        if m.startswith("create_symbol "):
            words = m.split()
            out[words[1]] = words[5]
    return out


@pytest.fixture
def shape_log():
    """torch's own ``dynamic`` log records (TORCH_LOGS=+dynamic)."""
    with torch_log(SHAPES_LOGGER, dynamic=logging.DEBUG) as handler:
        yield handler


@pytest.mark.parametrize(
    ("cell", "why"),
    [
        (
            "g = torch.compile(lambda x: x.tan(), backend='eager')\n"
            "g(torch.ones(2, 3)); g(torch.ones(6, 3))",
            "automatic dynamic",
        ),
        (
            "t = torch.ones(5, 3); torch._dynamo.mark_dynamic(t, 0)\n"
            "torch.compile(lambda x: x.cos(), backend='eager')(t)",
            "mark_dynamic",
        ),
        (
            "torch.compile(lambda x: x.sin(), backend='eager', dynamic=True)(torch.ones(5, 3))",
            "dynamic=True",
        ),
    ],
    ids=["automatic", "mark_dynamic", "dynamic-true"],
)
def test_dynamic_dimensions_named_as_torch_names_them(sh, shape_log, cell, why):
    rep = measured(sh, "", cell)
    made = created(shape_log.messages)  # independent: torch's create_symbol records
    d = rep.dynamic_shapes[-1]
    (sym_line,) = [s for s in d.symbols if s.startswith("s")][:1]
    sym = sym_line.split(" ", 1)[0]
    assert made[sym] == "L['x'].size()[0]"
    assert d.inputs[0].startswith(f"x: [{sym}, ")
    assert why in sym_line
    if why == "dynamic=True":
        assert any(s.endswith("dynamic=True") for s in d.symbols)
    assert "dynamic shapes" in str(rep)


def test_eager_then_compile_inferred_dimension(sh, shape_log):
    sh.run_cell("k = torch.compile(lambda x: x.exp(), backend='eager')")
    res, _ = run(
        sh,
        "%%stance eager_then_compile -q\nfor n in (2, 7, 9):\n    k(torch.ones(n, 3))",
    )
    rep = last(sh)
    d = rep.dynamic_shapes[-1]  # torch 2.8 also compiles the first call's frame
    made = created(shape_log.messages)
    (line,) = d.symbols
    assert made[line.split(" ", 1)[0]] == "L['x'].size()[0]"
    assert "eager_then_compile" in line


def test_a_specialized_dimension_names_the_guard_and_line(sh, shape_log):
    sh.run_cell("def h(x):\n    return x.view(8, -1).sum(0)\n", store_history=True)
    rep = measured(sh, "", "torch.compile(h, backend='eager', dynamic=True)(torch.ones(8, 4))")
    (d,) = rep.dynamic_shapes
    (spec,) = d.specialized
    sym = spec.split(" ", 1)[0]
    # torch's own record of the guard that pinned the symbol
    assert any(f"Eq({sym}, 8)" in m for m in shape_log.messages)
    assert f"specialized to 8 by Eq({sym}, 8)" in spec
    assert "`return x.view(8, -1).sum(0)`" in spec and ", line 2 in h" in spec


def test_mark_dynamic_specialized_explains_the_failed_cell(sh):
    sh.run_cell("def h2(x):\n    return x.view(8, -1).sum(0)\n")
    res, _ = run(
        sh,
        "%%stance default -q\nt = torch.ones(8, 4)\ntorch._dynamo.mark_dynamic(t, 0)\n"
        "torch.compile(h2, backend='eager')(t)",
    )
    assert not res.success
    assert type(res.error_in_exec).__name__ == "ConstraintViolationError"
    rep = last(sh)
    (note,) = [n for n in rep.notes if "marked dynamic" in n]
    assert "specialized it to be a constant (8)" in note


def failures(messages: list[str]) -> list[list[str]]:
    """Each recompile's guard failures, as torch's recompiles records list them."""
    entry = re.compile(r"^- \d+/\d+: ")  # torch indents each entry's text with "- "
    out = []
    for msg in messages:
        lines = [ln.strip() for ln in msg.splitlines()]
        out.append([ln[2:] for ln in lines if entry.match(ln)])
    return out


def test_every_failed_guard_is_shown_and_the_hint_follows_the_one_that_matters(
    sh, torch_recompiles
):
    sh.run_cell(
        "SCALE = 2.0\n"
        "@torch.compile(backend='eager', dynamic=False)\n"
        "def f(x):\n"
        "    return x * SCALE\n"
        "for n in (2, 3, 4):\n"
        "    f(torch.ones(n))\n"
    )
    torch_recompiles.clear()
    res, cap = run(sh, "%%stance default --no-plot\nSCALE = 5.0\nf(torch.ones(2))")
    assert res.success
    rep = last(sh)
    (torch_failures,) = failures(torch_recompiles)
    assert len(torch_failures) == 3
    (rc,) = rep.recompile_details
    ours = [f.reason for f in rc.failures]
    # the same three failures, each entry's, in torch's order
    assert [t.split("  #")[0].strip() for t in torch_failures] == ours
    assert any("G['SCALE'] == 2.0" in r for r in ours)
    assert rc.reason == ours[0]  # torch's record keeps only the first
    text = str(rep)
    for r in ours:
        assert r in text
    hints = rep.advice()
    assert not any("eager_then_compile" in h or "mark_dynamic" in h for h in hints)
    assert any("SCALE" in h and "tensor" in h for h in hints)
