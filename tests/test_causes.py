"""From counts to causes (issue 19): the recompile budget and the notebook's
own recompile traps, each checked against a real recompile of its kind and
torch's own ``recompiles`` log records (the guard text the cause is read
from), and the code object's cache entries (the budget)."""

from __future__ import annotations

import logging

import pytest
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

from stance_magic import causes

from conftest import last, run


class Recompiles(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def torch_recompiles():
    """torch's own recompiles log records (TORCH_LOGS=recompiles)."""
    torch._logging.set_logs(recompiles=True)
    handler = Recompiles()
    logger = logging.getLogger("torch._dynamo.guards.__recompiles")
    logger.addHandler(handler)
    yield handler.messages
    logger.removeHandler(handler)
    torch._logging.set_logs()


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
    assert "why it recompiled" in str(rep)


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
        assert "entries" in hist and "3/4" in hist
    finally:
        torch._dynamo.config.recompile_limit = old
