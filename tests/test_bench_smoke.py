"""The overhead benchmark still runs: tiny repeat counts, in a fresh interpreter.

Timing targets are machine dependent and are not asserted here; only that the
script exits 0, prints every row, and that its figures are positive.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_overhead.py"

ROWS = (
    "plain cell, stance_magic cell hooks off",
    "plain cell (extension loaded)",
    "%%stance -q ",
    "%%time (output captured; reference)",
    "first %%stance -q cell of the session",
    "%%stance --no-plot (text + HTML report)",
    "%%stance (report + chart)",
    'with set_stance("default"), stance_magic hooks off',
    'with set_stance("default"), extension loaded',
    "%%stance -q default",
    "CellReport._repr_html_()",
    "str(CellReport)",
    "import stance_magic (python -c, minus python -c pass",
    "import stance_magic (-X importtime, cumulative)",
    "import stance_magic with IPython already imported",
    "after import stance_magic: torch not loaded, matplotlib not loaded, ipywidgets not loaded",
    "empty cell under %%stance -q, added per cell, as a share of %%time's",
    "added per compiled call, on a model call of 3.0 ms",
    "import stance_magic leaves torch, matplotlib, ipywidgets unloaded",
)


@pytest.mark.integration
def test_benchmark_quick_run(tmp_path):
    text, res = _quick(SCRIPT.name, tmp_path)
    for row in ROWS:
        assert row in text, f"missing row {row!r} in:\n{text}"
    # five targets, the empty cell beyond IPython's floor among them
    assert text.count("MET") + text.count("MISSED") == 5

    figures = [
        *(
            res["cells"]["cells"][k]
            for k in ("plain_no_hooks", "plain", "noop_magic", "stance_q", "time")
        ),
        *(res["report_cells"]["cells"][k] for k in ("plain", "stance_report", "stance_chart")),
        *(res["loop"]["cells"][k] for k in ("bare_pristine", "bare_hooked", "stance_q")),
        *(res["loop"]["ratio"][k] for k in ("bare_hooked", "stance_q")),
        res["render"]["html"],
        res["render"]["text"],
        res["import"]["importtime"],
        res["import"]["in_ipython"],
        res["import"]["process"]["import"],
    ]
    for fig in figures:
        assert fig["n"] >= 1
        assert fig["median"] > 0 and fig["q1"] > 0 and fig["q3"] >= fig["q1"]
    assert res["cells"]["first_stance_cell_s"] > 0
    assert res["load_ext_s"] is None or res["load_ext_s"] > 0
    assert res["render"]["compiles"] >= 1 and res["render"]["html_chars"] > 0
    assert res["import"]["heavy_loaded"] == []


def test_format_results_has_every_section():
    """The table builder on hand-made figures (no shell, no torch)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bench_overhead as b
    finally:
        sys.path.remove(str(SCRIPT.parent))
    S = b.Stat
    cells = {
        k: S([1e-4, 1.1e-4]) for k in ("plain_no_hooks", "plain", "noop_magic", "stance_q", "time")
    }
    res = {
        "command": "x",
        "load_ext_s": 1.0,
        "env": {"python": "3", "platform": "p", "cpus": "2"},
        "cells": {
            "rounds": 2,
            "batch": 1,
            "first_stance_cell_s": 1e-3,
            "cells": cells,
            "added": {
                "plain": S([1e-5]),
                "noop_magic": S([3e-6]),
                "stance_q": S([4e-6]),
                "time": S([1e-5]),
            },
        },
        "loop": {
            "calls": 10,
            "rounds": 1,
            "cells": {k: S([1e-3]) for k in ("bare_pristine", "bare_hooked", "stance_q")},
            "ratio": {k: S([1.01]) for k in ("bare_hooked", "stance_q", "stance_q_vs_hooked")},
        },
    }
    text = b.format_results(res)
    assert "1. Per cell" in text and "2. One cell of 10 calls" in text
    assert text.count("MET") == 4 and "MISSED" not in text
    assert "IPython's floor" in text and "0.30" in text
    assert b.fmt_t(2.5e-6) == "2.5 µs" and b.fmt_t(0.0123) == "12.3 ms" and b.fmt_t(1.5) == "1.50 s"
    assert b.fmt_d(-1e-6) == "−1.0 µs"


def _quick(name: str, tmp_path: Path, timeout: int = 300) -> tuple[str, object]:
    script = SCRIPT.parent / name
    out = tmp_path / f"{name}.json"
    proc = subprocess.run(
        [sys.executable, str(script), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(SCRIPT.parent.parent),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout, json.loads(out.read_text())


@pytest.mark.integration
def test_guard_benchmark_quick_run(tmp_path):
    text, res = _quick("bench_guards.py", tmp_path)
    assert "stance_magic, per lookup (the report)" in text and "outside clock" in text
    assert "added per compiled call while measuring" in text
    for r in res["models"]:
        assert r["ours_s"] > 0 and r["profiler_s"] > 0 and r["ours_skip_s"] > 0
        assert r["overhead_ratio"] > 0
        assert r["ratios"]["report / profiler"] > 0
    assert res["added_per_call_s"] is not None


@pytest.mark.integration
def test_anatomy_benchmark_quick_run(tmp_path):
    text, res = _quick("bench_anatomy.py", tmp_path)
    assert "the anatomy of a compiled call" in text
    assert [w["workload"] for w in res["workloads"]] == [
        "a tiny function, 1 argument",
        "a function of 64 arguments",
        "GPT-2 (forward, no KV cache)",
    ]
    for w in res["workloads"]:
        assert set(w["parts"]) == {"whole call", "lookup", "compiled code", "eager call"}
        for part in w["parts"].values():
            assert part["report_s"] > 0 and part["independent_s"] > 0 and part["ratio"] > 0
        assert w["wrapper_s"] > 0


@pytest.mark.integration
def test_model_benchmark_quick_run(tmp_path):
    """bench_models.py: GPT-2 under aot_eager, one fresh process per way of
    measuring, each a row with its first three cells and a steady state."""
    text, res = _quick("bench_models.py", tmp_path, timeout=600)
    assert "first <= 1.25" in text and "steady <= 1.05" in text and "loading the extension" in text
    rows = res["summary"]["rows"]
    assert {r["mode"] for r in rows} == {"q", "report", "measure"}
    for r in rows:
        assert r["model"] == "gpt2" and r["backend"] == "aot_eager"
        assert len(r["first"]) == 3 and all(x > 0 for x in r["first"]) and r["steady"] > 0
        assert 0 < r["wall_vs_outside"] <= 1 and r["plain_cell_s"] > 0
    for run in res["runs"]:
        assert len(run["cells"]) == 4 and len(run["plain"]) == 5


@pytest.mark.integration
def test_memory_benchmark_quick_run(tmp_path):
    text, res = _quick("bench_memory.py", tmp_path)
    assert "with -m (cell)" in text and "aot_eager_then_compile vs eager_then_compile" in text
    for r in res["workloads"]:
        assert r["ratio"] > 0 and r["events"] > 0 and r["peak_bytes"] > 0
    peaks = res["first_call_peaks"]
    assert peaks["aot_eager_then_compile"] < peaks["eager_then_compile"]


PANEL_SCRIPT = SCRIPT.parent / "bench_panel.py"


@pytest.mark.integration
def test_panel_benchmark_quick_run(tmp_path):
    """bench_panel.py in a real kernel with tiny counts: it runs, prints every
    row and a verdict, and its figures are positive (timings not asserted)."""
    pytest.importorskip("ipywidgets")
    pytest.importorskip("jupyter_client")
    out = tmp_path / "panel.json"
    proc = subprocess.run(
        [sys.executable, str(PANEL_SCRIPT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=str(PANEL_SCRIPT.parent.parent),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    for row in (
        "trivial cell `x = 1`, watch on",
        "warm compiled call `y = f(x)`, panel collapsed",
        "warm compiled call `y = f(x)`, live area open",
    ):
        assert row in text, f"missing row {row!r} in:\n{text}"
    assert text.count("MET") + text.count("MISSED") == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    res = json.loads(out.read_text())
    for cell in res["cells"].values():
        # medians of real timings are positive; the quartiles of a quick run's
        # two or three rounds are extrapolated and may fall below zero (seen: -0.2)
        for fig in (cell["open"], cell["none"], cell["ratio"]):
            assert fig["n"] >= 1 and fig["median"] > 0 and fig["q3"] >= fig["q1"]
    assert res["history_after"] >= 1  # the warm calls were measured


@pytest.mark.inductor
def test_warm_start_benchmark_quick_run(tmp_path):
    """bench_warm_start.py --quick: six fresh kernels (cold, on-disk warm,
    fresh directory + %stance cache load; each without and with Dynamo's
    precompiled frames) on the tour model with Inductor; it prints every row
    and the goals' verdicts, and the caches hit where they must (timings not
    asserted)."""
    pytest.importorskip("jupyter_client")
    text, res = _quick("bench_warm_start.py", tmp_path, timeout=900)
    for row in (
        "(a) cold: empty cache directory",
        "(b) on-disk caches warm (same directory, new kernel)",
        "(c) fresh directory + %stance cache load",
        "(d) precompile on, cold (ratios to (a))",
        "(e) precompile on, same directory as (d)",
        "(f) precompile on, fresh directory + load of (d)'s file",
    ):
        assert row in text, f"missing row {row!r} in:\n{text}"
    # the goals: (c)'s, and (e)'s and (f)'s from torch.compile and for the first call alone
    assert text.count("MET") + text.count("MISSED") == 5
    assert text.count("the first call alone") == 2
    tour = res["models"]["tour"]
    # Dynamo's precompiled frame served (e) and (f): no tracing, a cached call
    assert tour["pc-cold"]["precompiled"] == ["miss"]
    for key in ("pc-disk", "pc-load"):
        assert tour[key]["precompiled"] == ["hit"], tour[key]
        assert tour[key]["dynamo_s"]["median"] == 0 and tour[key]["calls"][:2] == [1, 0]
    assert tour["cold"]["state"] == "cold" and tour["cold"]["fx"] == "0/1"
    assert tour["disk"]["state"] == tour["load"]["state"] == "warm"
    assert tour["disk"]["fx"] == tour["load"]["fx"] == "1/0"
    for key in ("cold", "disk", "load", "pc-cold"):
        fig = tour[key]
        assert fig["first_s"]["median"] > fig["dynamo_s"]["median"] > 0
        assert fig["ratio"]["median"] > 0
    assert tour["saved_bytes"] > 0
    # the file brought the compiled C++ binaries: (c) and (f) built none
    assert tour["cold"]["kernels_compiled"] > 0
    assert tour["load"]["kernels_compiled"] == tour["pc-load"]["kernels_compiled"] == 0
    for key in ("cold", "pc-disk", "pc-load"):
        assert 0 < tour[key]["first_call_s"]["median"] <= tour[key]["first_s"]["median"]
    assert tour["pc-load"]["call_ratio"]["median"] < tour["pc-load"]["ratio"]["median"]


@pytest.mark.integration
def test_hook_floor_benchmark_quick_run(tmp_path):
    """bench_hooks.py --quick: every variant runs, and each that counts made
    one count per call and hit (timings not asserted)."""
    text, res = _quick("bench_hooks.py", tmp_path)
    assert re.search(
        r"target for the measured loop: ≤ \d\.\d\d×; here \d+\.\d{3}×: (met|missed)$", text, re.M
    )
    v = res["variants"]
    assert list(v) == ["bare", "pass-through", "counting", "counting + checks", "stance_magic"]
    for name in ("counting", "counting + checks"):
        assert v[name]["counts"] == {"calls": res["calls"], "hits": res["calls"]}, v[name]
    ours = v["stance_magic"]["counts"]
    assert ours["hits"] >= res["calls"] and ours["counted only"] > 0 and ours["timed"] > 0
    assert all(x["per_call_s"] > 0 and x["ratio"] > 0 for x in v.values())


def _stress():
    """benchmarks/stress.py as a module (not run)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import stress
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return stress


@pytest.mark.integration
def test_stress_hog_runs_busy_and_is_gone_after_stop():
    """The hog of benchmarks/stress.py: its processes start, burn CPU (their
    CPU time grows; the load average is too noisy to assert on), and none is
    left after stop(); a hog process past its max_s ends by itself."""
    import time

    s = _stress()
    if s.cpu_seconds(os.getpid()) is None:
        pytest.skip("no /proc and no psutil: no CPU time to read")
    hog = s.Hog(torch_procs=1, python_procs=1, threads=1, size=256, max_s=60)
    try:
        hog.start(ready_timeout_s=60)
        assert len(hog.alive()) == 2
        before = hog.cpu()
        time.sleep(1.5)
        after = hog.cpu()
        assert set(before) == set(after) == set(hog.pids)
        for pid in hog.pids:
            assert after[pid] - before[pid] > 0.1, (before, after)
        pids = hog.pids
    finally:
        hog.stop()
    assert hog.alive() == [] and hog.procs == []
    assert all(s.cpu_seconds(pid) is None for pid in pids)
    hog.stop()  # again: a no-op

    short = s.Hog(torch_procs=0, python_procs=1, max_s=0.5)
    try:
        short.start(ready_timeout_s=30)
        p = short.procs[0][1]
        assert p.wait(timeout=10) == 0  # it ended by itself
    finally:
        short.stop()


def test_stress_parses_pytest_output():
    """The parsers of benchmarks/stress.py on pytest's summary and short-summary lines."""
    s = _stress()
    text = "\n".join(
        [
            "....F..s",
            "=========================== short test summary info ============================",
            "FAILED tests/test_x.py::test_y - AssertionError",
            "FAILED tests/test_x.py::test_z[a-b] - assert 1 == 2",
            "FAILED tests/test_w.py::Test::test_v",
            "ERROR tests/test_e.py::test_f - RuntimeError: boom",
            "3 failed, 318 passed, 15 skipped, 60 deselected, 20 warnings in 51.38s",
        ]
    )
    assert s.parse_summary(text) == {
        "failed": 3,
        "passed": 318,
        "skipped": 15,
        "deselected": 60,
        "warnings": 20,
    }
    assert s.parse_failed(text) == [
        "tests/test_x.py::test_y",
        "tests/test_x.py::test_z[a-b]",
        "tests/test_w.py::Test::test_v",
        "tests/test_e.py::test_f (error)",
    ]
    # the = rule, singulars, and only the last summary line counts
    assert s.parse_summary("1 passed in 0.1s\n== 1 failed, 1 error, 1 warning in 2.00s ==") == {
        "failed": 1,
        "errors": 1,
        "warnings": 1,
    }
    assert s.parse_summary("no tests ran in 0.01s") == {}
    assert s.parse_summary("nothing like a summary") == {}
    assert s.verdict(0) == (True, "") and s.verdict(5) == (True, "no tests collected")
    assert not s.verdict(1)[0] and not s.verdict(None)[0]

    runs = [
        s.Run("fast", i, 3, rc, rc == 0, "", {}, failed, sec, load, load, "x.log")
        for i, rc, failed, sec, load in (
            (1, 0, [], 10.0, 6.0),
            (2, 1, ["tests/a.py::t", "tests/b.py::u"], 12.0, 5.0),
            (3, 1, ["tests/a.py::t"], 20.0, 7.0),
        )
    ]
    summary = s.summarize(runs)["fast"]
    assert summary == {
        "runs": 3,
        "failed_runs": 2,
        "failed_tests": {"tests/a.py::t": 2, "tests/b.py::u": 1},
        "median_s": 12.0,
        "median_load": 6.0,
    }
    table = s.format_summary({"fast": summary}, "no hog")
    assert "tests/a.py::t" in table and "failed runs" in table
    assert "FAILED tests/b.py::u" in s.format_run(runs[1])

    # a test path in --pytest-args narrows the lane's run (its -m stays)
    cmd = s.lane_cmd("fast", ["-x", "tests/test_layout.py::test_a"])
    assert "tests" not in cmd and cmd[-2:] == ["-x", "tests/test_layout.py::test_a"]
    assert "-rfE" in cmd and s.FAST_MARK in cmd
    assert s.lane_cmd("timing", ["-k", "sync"])[-4:] == ["tests", "-rfE", "-k", "sync"]
