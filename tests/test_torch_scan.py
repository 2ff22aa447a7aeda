"""Nothing of torch changed by measuring, read from torch itself: every
function, class and method of torch's loaded modules (``tests/torchscan.py``)
is scanned before and after each entry point.

- ``measure()`` (with each of its options): nothing is another object after
  the block.
- The loaded extension (a ``%%stance`` cell, ``%stance watch on`` / ``off``,
  the panel, ``%stance cache precompile on`` / ``off``): what it keeps
  installed between cells carries the original's name, qualified name,
  docstring, signature and ``__wrapped__``.
- ``%unload_ext stance_magic``: nothing is another object.

Each workload runs once bare before the first scan, so torch's own lazy
set-up is not taken for ours.
"""

from __future__ import annotations

import pytest
import torch
from IPython.utils.capture import capture_output
from torchscan import bound_original, changed, faithful, ours, scan

import stance_magic
from stance_magic.probe import precompile as pp

WORK = """
import torch
def work(x):
    y = x.sin()
    print("a graph break")
    return y.cos()
cwork = torch.compile(work, backend="eager")
cwork(torch.ones(3)); cwork(torch.ones(3))
"""


def _workload() -> None:
    ns: dict = {"__name__": "work"}  # (torch's precompile reads it)
    with capture_output():
        exec(compile(WORK, "<work>", "exec"), ns)


def _clean() -> dict:
    """A scan of torch holding none of stance_magic's code (whatever ran before)."""
    now = scan()
    assert [k for k, v in now.items() if ours(v)] == [], "left by an earlier test"
    return now


def _report(diff: dict) -> list[str]:
    return [f"{k}: {b!r} -> {a!r}" for k, (b, a) in sorted(diff.items())]


OPTIONS = [
    {},
    {"stance": "force_eager"},
    {"stance": "eager_on_recompile"},
    {"stance": "eager_then_compile"},
    {"memory": True},
    {"profile_lookups": True},
    {"label": "a label", "skip_guard_eval_unsafe": False},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_measure_leaves_nothing_of_torch_replaced(options):
    _workload()
    before = _clean()
    with stance_magic.measure(**options):
        _workload()
    assert _report(changed(before, scan())) == []


def test_measure_with_a_trace_and_a_timeline_leaves_nothing_replaced(tmp_path):
    _workload()
    with stance_magic.measure(trace=tmp_path / "t1", timeline=tmp_path / "t1.json"):
        _workload()
    before = _clean()
    with stance_magic.measure(trace=tmp_path / "t2", timeline=tmp_path / "t2.json"):
        _workload()
    assert _report(changed(before, scan())) == []


@pytest.mark.skipif(pp.available() is not None, reason="this torch has no precompiled frames")
def test_measure_with_torchs_precompile_on_leaves_nothing_replaced():
    config = torch._dynamo.config
    was = config.caching_precompile
    config.caching_precompile = True
    try:
        _workload()
        before = _clean()
        with stance_magic.measure():
            _workload()
        assert _report(changed(before, scan())) == []
    finally:
        config.caching_precompile = was


def _kept(before: dict, after: dict) -> list[str]:
    """What the loaded extension keeps in place of torch's code that does
    not carry the original's name, docstring, signature and ``__wrapped__``."""
    out = []
    for k, (orig, now) in sorted(changed(before, after).items()):
        if orig is None:
            # on an object torch keeps (torch calls DynamoCache.load(fn)):
            # in place of its class's method
            orig = bound_original(k)
        missing = faithful(orig, now)
        if missing:
            out.append(f"{k}: {now!r} lacks {', '.join(missing)}")
    return out


def _cell(sh, src: str) -> None:
    with capture_output():
        res = sh.run_cell(src, store_history=True)
    assert res.success, res.error_in_exec or res.error_before_exec


def test_the_extension_keeps_only_faithful_wrappers_and_unloading_takes_them_out(bare_shell):
    sh = bare_shell
    _cell(sh, WORK)  # bare first: torch's own set-up
    _cell(sh, "cwork(torch.ones(3))")
    before = _clean()
    _cell(sh, "%load_ext stance_magic")
    _cell(sh, "%%stance\ncwork(torch.ones(3))")
    _cell(sh, "%%stance eager_then_compile\ncwork(torch.ones(4))")
    assert _kept(before, scan()) == [], "after %%stance cells"
    _cell(sh, "%stance watch on")
    _cell(sh, "cwork(torch.ones(3))")
    _cell(sh, "%stance watch off")
    assert _kept(before, scan()) == [], "after %stance watch on / off"
    _cell(sh, "import stance_magic\np = stance_magic.panel()")
    _cell(sh, "cwork(torch.ones(3))")
    _cell(sh, "p.close()")
    assert _kept(before, scan()) == [], "after the panel"
    if pp.available() is None:
        was = torch._dynamo.config.caching_precompile
        try:
            _cell(sh, "%stance cache precompile on")
            _cell(sh, WORK)
            assert _kept(before, scan()) == [], "after %stance cache precompile on"
            _cell(sh, "%stance cache precompile off")
            assert _kept(before, scan()) == [], "after %stance cache precompile off"
        finally:
            torch._dynamo.config.caching_precompile = was
    _cell(sh, "%unload_ext stance_magic")
    assert _report(changed(before, scan())) == [], "after %unload_ext stance_magic"


def test_the_scan_sees_a_replaced_function():
    """The scan's own check: a function of torch replaced, then put back."""
    import torch._dynamo.eval_frame as ef

    before = _clean()
    orig = ef.innermost_fn
    ef.innermost_fn = lambda fn: orig(fn)
    try:
        assert list(changed(before, scan())) == ["torch._dynamo.eval_frame.innermost_fn"]
    finally:
        ef.innermost_fn = orig
    assert changed(before, scan()) == {}
