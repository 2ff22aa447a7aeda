"""Stances and reports across ranks: gloo, 2 processes, CPU.

Three groups of tests:

* torchrun: ``torchrun --nproc-per-node 2 tests/rank_worker.py`` (run once per
  module, bounded by a timeout, its process group killed on failure): rank 1
  fed another shape is flagged with its rank and the recompile reason, a
  ``fail_on_recompile`` refusal on rank 1 is reported with its guard, graph
  breaks on one rank, full reports, one stance on every rank, and no
  collective without ``--ranks``;
* ipyparallel: a cluster of 2 engines started and stopped in the test runs
  ``%%px`` + ``%%stance --ranks``, and the client shows both ranks;
* in this process (no process group): ``--ranks`` is a one-line UsageError and
  no collective runs; the combined view's data, text, HTML and chart.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

import stance_magic
from stance_magic import probe
from stance_magic.builder.ranks import MAX_REASONS, summarize
from stance_magic.report import CellReport, GraphBreak, Recompile
from stance_magic.report.ranks import RankReport, RankSummary
from stance_magic.text import rank_set

from conftest import html_outputs, run, text_outputs

HERE = Path(__file__).resolve().parent
ROOT = Path(stance_magic.__file__).resolve().parent.parent
TORCHRUN_TIMEOUT_S = 150
IPP_TIMEOUT_S = 90

pytestmark = pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(), reason="needs torch.distributed gloo"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    """This checkout's package first on the path of every child, one thread each."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["OMP_NUM_THREADS"] = "1"
    return env


# -- torchrun ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory):
    """Run the worker under torchrun once; {rank: what that rank saw}."""
    out = tmp_path_factory.mktemp("ranks")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(_free_port()),
        str(HERE / "rank_worker.py"),
        str(out),
    ]
    proc = subprocess.Popen(
        cmd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        log, _ = proc.communicate(timeout=TORCHRUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate(timeout=10)
        pytest.fail(f"torchrun did not finish in {TORCHRUN_TIMEOUT_S} s:\n{log[-3000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything left of the group
    errors = "".join(p.read_text() for p in out.glob("error*.txt"))
    assert proc.returncode == 0 and not errors, f"{errors}\n{log[-3000:]}"
    seen = {r: json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)}
    for r in (0, 1):
        assert seen[r]["package"] == stance_magic.__file__  # this checkout, not another
    return seen


def _cell(seen, rank, key):
    return seen[rank]["cells"][key]


@pytest.mark.integration
def test_rank_fed_another_shape_is_flagged_with_rank_and_reason(torchrun):
    c0 = _cell(torchrun, 0, "shapes")
    assert c0["success"] and c0["collectives"] == {"gather_object": 1, "all_gather_object": 0}
    text = c0["text"][0]
    assert text.startswith("stance_magic across 2 ranks")
    lines = text.splitlines()
    assert any(ln.split()[:1] == ["0"] for ln in lines) and any(
        ln.split()[:1] == ["1"] for ln in lines
    )
    flag = next(ln for ln in lines if "DIVERGED: recompile counts differ" in ln)
    assert "0 on rank 0; 1 on rank 1" in flag
    assert "rank 1: fn" in flag and "size mismatch at index 0. expected 8, actual 16" in flag
    assert "Recompile(" not in flag  # torch's reason, not the record's repr
    assert "DIVERGED: compile counts differ: 0 on rank 0; 1 on rank 1" in text
    assert "slowest compile: rank 1" in text
    assert c0["images"] == 1  # the chart
    html = c0["html"][0]
    assert "diverged" in html and "expected 8, actual 16" in html
    view = torchrun[0]["views"][0]
    rec = next(f for f in view["flags"] if f["kind"] == "recompiles")
    assert rec["ranks"] == [1] and rec["divergence"]
    assert [r["recompiles"] for r in view["rows"]] == [0, 1]
    assert view["png"] > 1000
    # rank 1 shows one line and keeps its own report, with a note
    c1 = _cell(torchrun, 1, "shapes")
    assert c1["collectives"]["gather_object"] == 1
    assert c1["text"] == [
        "stance_magic: rank 1 of 2: 1 compile(s), 1 recompile(s); the combined view is on "
        "rank 0 (this rank's report: stance_magic.history()[-1])"
    ]
    # where its summary went is a field of its report, which says it
    assert torchrun[1]["own_gathered"][1] == {
        "rank": 1,
        "world_size": 2,
        "to": 0,
        "mode": "summary",
    }
    assert (
        "note: rank 1 of 2: this rank's summary went to rank 0, which shows the combined "
        "view of all ranks"
    ) in torchrun[1]["own_text"][1]


@pytest.mark.integration
def test_fail_on_recompile_refusal_is_reported_with_rank_and_guard(torchrun):
    c1 = _cell(torchrun, 1, "refused")
    assert not c1["success"] and c1["error"].startswith("RuntimeError: Detected recompile")
    assert "rank 1 of 2" in c1["text"][-1]  # rank 1 still took part in the gather
    c0 = _cell(torchrun, 0, "refused")
    assert c0["success"]
    text = c0["text"][0]
    flag = next(ln for ln in text.splitlines() if "DIVERGED: rank 1 refused" in ln)
    assert "under fail_on_recompile" in flag
    # named on every release (torch 2.8's refusal names none: its guard check does)
    assert "guard that failed: 0/1: tensor 'x' rank mismatch. expected 2, actual 3" in flag
    view = torchrun[0]["views"][1]
    refused = next(f for f in view["flags"] if f["kind"] == "refused")
    assert refused["ranks"] == [1]
    assert [r["refused_recompiles"] for r in view["rows"]] == [0, 1]
    assert view["rows"][1]["error"].startswith("RuntimeError: Detected recompile")


@pytest.mark.integration
def test_same_stance_on_every_rank_in_one_line(torchrun):
    c0 = _cell(torchrun, 0, "session")
    assert c0["stdout"].strip() == (
        "session stance: fail_on_recompile on all 2 ranks (was: default on rank 0)"
    )
    assert _cell(torchrun, 1, "session")["stdout"].strip() == ""
    rows = torchrun[0]["views"][1]["rows"]
    assert {r["stance"] for r in rows} == {"fail_on_recompile"}
    for r in (0, 1):
        assert _cell(torchrun, r, "session_back")["stdout"] == ""  # -q


@pytest.mark.integration
def test_graph_breaks_on_one_rank_and_full_reports(torchrun):
    text = _cell(torchrun, 0, "breaks")["text"][0]
    flag = next(ln for ln in text.splitlines() if "DIVERGED: graph breaks differ" in ln)
    assert "0 break(s) on rank 0; 1 break(s) on rank 1" in flag
    assert "torch._dynamo.graph_break()" in flag
    assert "--- rank 0 ---" in text and "--- rank 1 ---" in text
    view = torchrun[0]["views"][2]
    assert view["mode"] == "full" and view["reports"] == 2


@pytest.mark.integration
def test_python_api_gathers_on_every_rank(torchrun):
    api0, api1 = torchrun[0]["api"], torchrun[1]["api"]
    assert api0["divergent"] == 0 and "no divergence" in api0["view"]
    assert api1["view"] is None and api1["gathered"]["rank"] == 1
    assert "note: rank 1 of 2: this rank's summary went to rank 0" in api1["report_text"]


@pytest.mark.integration
def test_reports_are_published_once_with_the_combined_view(torchrun):
    # plain, shapes, refused, breaks and the API call: five reports each
    pub0, pub1 = torchrun[0]["published"], torchrun[1]["published"]
    assert len(pub0) == len(pub1) == 5
    assert [p["ranks"] for p in pub0] == [False, True, True, True, True]
    assert not any(p["ranks"] for p in pub1)
    assert all(p["gathered"]["rank"] == 1 and p["gathered"]["to"] == 0 for p in pub1[1:])
    assert all(p["gathered"] is None for p in pub1[:1])


@pytest.mark.integration
def test_no_collective_without_the_flag_in_a_process_group(torchrun):
    for r in (0, 1):
        for key in ("plain", "plain_line"):
            assert _cell(torchrun, r, key)["collectives"] == {
                "gather_object": 0,
                "all_gather_object": 0,
            }
        no_group = _cell(torchrun, r, "no_group")
        assert (
            not no_group["success"] and "no torch.distributed process group" in (no_group["error"])
        )


# -- ipyparallel ---------------------------------------------------------------------


@pytest.mark.integration
def test_ipyparallel_px_cell_shows_both_ranks_in_the_client(monkeypatch):
    ipp = pytest.importorskip("ipyparallel")
    for key, value in _env().items():
        if key in ("PYTHONPATH", "OMP_NUM_THREADS"):
            monkeypatch.setenv(key, value)
    InteractiveShell.clear_instance()
    c = Config()
    c.HistoryAccessor.enabled = False
    client_shell = InteractiveShell.instance(config=c)
    client_shell.display_formatter.active_types = list(client_shell.display_formatter.format_types)
    cluster = ipp.Cluster(n=2, log_level=40)
    t0 = time.monotonic()
    try:
        cluster.start_cluster_sync()
        rc = cluster.connect_client_sync()
        rc.wait_for_engines(2, timeout=IPP_TIMEOUT_S)
        rc.activate()  # %px / %%px in the client shell, blocking
        view = rc[:]
        view.scatter("rank", rc.ids, flatten=True, block=True)
        view.push({"port": _free_port()}, block=True)
        setup = view.execute(
            "import os, datetime, torch, torch.distributed as dist, stance_magic\n"
            "os.environ['MASTER_ADDR'] = '127.0.0.1'\n"
            "os.environ['MASTER_PORT'] = str(port)\n"
            "dist.init_process_group('gloo', rank=rank, world_size=2,\n"
            "                        timeout=datetime.timedelta(seconds=60))\n"
            "%load_ext stance_magic\n"
            "f = torch.compile(lambda x: x.sin() + 1, backend='eager')\n"
            "y = f(torch.randn(8, 4))\n",
            block=False,
        )
        setup.get(timeout=IPP_TIMEOUT_S)
        assert view.pull("stance_magic.__file__", block=True) == [stance_magic.__file__] * 2
        # the same stance on every engine: %px %stance ...
        with capture_output() as cap:
            client_shell.run_cell("%px %stance fail_on_recompile")
        assert cap.stdout.count("session stance: fail_on_recompile (was: default)") == 2
        view.execute("now = str(stance_magic.current_stance())", block=True)
        assert view.pull("now", block=True) == ["fail_on_recompile"] * 2
        # ... and checked by rank 0 in one line with --ranks
        with capture_output() as cap:
            client_shell.run_cell("%px %stance default --ranks")
        assert "session stance: default on all 2 ranks (was: fail_on_recompile" in cap.stdout
        assert cap.stdout.count("session stance") == 1
        # %%px then %%stance --ranks: rank 1 fed another shape
        res = client_shell.run_cell(
            "%%px --noblock\n%%stance --ranks\ny = f(torch.randn(16 if rank == 1 else 8, 4))"
        )
        ar = res.result
        ar.get(timeout=IPP_TIMEOUT_S)
        ar.wait_for_output(10)
        by_engine = [[o["data"].get("text/plain", "") for o in outs] for outs in ar.outputs]
        assert by_engine[0][0].startswith("stance_magic across 2 ranks")
        assert "recompile counts differ: 0 on rank 0; 1 on rank 1" in by_engine[0][0]
        assert any("image/png" in o["data"] for o in ar.outputs[0])  # the chart
        assert by_engine[1][0].startswith("stance_magic: rank 1 of 2")
        # what the client shows: %%px displays every engine's outputs
        with capture_output() as cap:
            ar.display_outputs()
        shown = text_outputs(cap)
        assert "[output:0]" in shown and "[output:1]" in shown
        combined = next(t for t in shown if t.startswith("stance_magic across 2 ranks"))
        rows = [ln.split()[0] for ln in combined.splitlines()[3:5]]
        assert rows == ["0", "1"]
        assert any("rank 1 of 2" in t for t in shown)
        view.execute("dist.destroy_process_group()", block=False).get(timeout=30)
    finally:
        with contextlib.suppress(Exception):
            cluster.stop_cluster_sync()
        InteractiveShell.clear_instance()
    assert time.monotonic() - t0 < 2 * IPP_TIMEOUT_S


# -- no process group (this process) ---------------------------------------------------


@pytest.fixture
def no_collectives(monkeypatch):
    """Any gather here fails the test."""
    calls = []

    def refuse(*a, **k):
        calls.append(a)
        raise AssertionError("a collective ran")

    for name in ("gather_object", "all_gather_object", "gather", "all_gather"):
        monkeypatch.setattr(dist, name, refuse)
    assert not dist.is_initialized()
    return calls


def test_without_a_process_group_ranks_is_a_usage_error_and_nothing_is_gathered(
    shell, no_collectives
):
    shell.user_ns.update(torch=torch, f=torch.compile(lambda x: x + 1, backend="eager"))
    res, cap = run(shell, "%%stance --ranks\nran = True")
    assert not res.success and "ran" not in shell.user_ns
    assert "UsageError: %%stance --ranks: no torch.distributed process group" in cap.stderr
    assert len(cap.stderr.strip().splitlines()) == 1  # one line, no traceback
    res, cap = run(shell, "%stance fail_on_recompile --ranks")
    assert not res.success and "no torch.distributed process group" in cap.stderr
    assert stance_magic.current_stance().name == "default"  # nothing set
    res, cap = run(shell, "%%stance --full\npass")
    assert not res.success and "--full goes with --ranks" in cap.stderr
    res, cap = run(shell, "%%stance\ny = f(torch.ones(3))")
    assert res.success and html_outputs(cap)[0].count("stance_magic") >= 1
    assert stance_magic.history()[-1].ranks is None
    with pytest.warns(RuntimeWarning, match="gather ignored: no torch.distributed process"):
        with stance_magic.measure(ranks=True) as rep:
            shell.user_ns["f"](torch.ones(3))
    assert rep.ranks is None and rep.cache_hits == 1
    assert no_collectives == []


def test_gather_not_asked_means_no_process_group_lookup(shell, monkeypatch):
    asked = []
    monkeypatch.setattr(probe, "process_group_ready", lambda: asked.append(1) or False)
    run(shell, "%%stance -q\npass")
    with stance_magic.measure():
        pass
    assert asked == []


# -- the combined view (data, text, HTML, chart) ------------------------------------------


def _rep(**kw) -> CellReport:
    return CellReport(**{"stance": "default", **kw})


def _view(reports, mode="summary") -> RankReport:
    rows = [summarize(r, i, host="node-0") for i, r in enumerate(reports)]
    return RankReport(world_size=len(rows), rows=rows, mode=mode)


def test_alike_ranks_have_no_divergence():
    view = _view([_rep(compiles=1, compile_s=0.2, wall_s=0.3) for _ in range(2)])
    assert view.divergent == []
    assert [f.kind for f in view.flags] == ["slowest"]
    assert "no divergence" in str(view)
    assert "peak memory" not in str(view) and "host" not in str(view)


def test_stances_errors_and_memory_only_when_present():
    figure = probe.MemoryFigure("cpu", 12_500_000, 0, probe.CPU_MEMORY_METHOD)  # -m
    a = _rep(stance="default", compiles=1, compile_s=0.1, memory=[figure])
    b = _rep(stance="force_eager", error="ValueError: boom")
    view = _view([a, b])
    kinds = [f.kind for f in view.divergent]
    assert kinds == ["stance", "compiles", "error"]
    assert "ranks ran under different stances: default on rank 0; force_eager on rank 1" in str(
        view
    )
    assert "rank 1 raised ValueError: boom" in str(view)
    head = str(view).splitlines()[1]
    assert "peak memory" in head and "error" in head
    assert "12.5 MB" in str(view)


def test_html_escapes_every_string():
    bad = _rep(
        stance="<b>x</b>",
        error="<script>alert(1)</script>",
        recompile_details=[Recompile("<img src=x>", "f (<In>)", "0/1")],
    )
    view = RankReport(
        world_size=2,
        rows=[summarize(_rep(), 0, host="a"), summarize(bad, 1, host="<h>")],
    )
    page = view._repr_html_()
    for raw in ("<script>", "<img src=x>", "<b>x</b>", "<h>"):
        assert raw not in page
    assert "&lt;script&gt;" in page and "&lt;h&gt;" in page


def test_summary_is_bounded_whatever_the_cell_did():
    rep = _rep(
        compiles=50,
        compile_s=3.0,
        recompile_details=[Recompile("x" * 5000, "f", f"0/{i}") for i in range(50)],
        graph_break_details=[
            GraphBreak(reason="y" * 5000, count=2, summary="y" * 5000, line=i) for i in range(50)
        ],
        refused_guards=["z" * 5000],
        error="E" * 5000,
    )
    s = summarize(rep, 0)
    size = len(__import__("pickle").dumps(s.to_wire()))
    assert len(s.recompile_reasons) == MAX_REASONS and len(s.break_samples) == 3
    assert s.recompile_reasons[0].startswith("f: xxx") and "Recompile(" not in str(s)
    assert s.break_samples[0].startswith("2× ") and "GraphBreak(" not in str(s)
    assert s.graph_breaks == 100 and s.recompiles == 50
    assert size < 2000
    assert RankSummary.from_wire(s.to_wire()) == s


def test_many_ranks_fold_and_chart():
    reps = [_rep(compiles=1, compile_s=0.1 + i * 1e-4, wall_s=0.2) for i in range(64)]
    reps[37] = _rep(
        compiles=2,
        compile_s=0.5,
        wall_s=0.6,
        recompile_details=[Recompile("size mismatch", "f", "0/1")],
    )
    view = _view(reps)
    text = str(view)
    assert "recompile counts differ: 0 on ranks 0-36, 38-63; 1 on rank 37" in text
    assert "slowest compile: rank 37" in text
    assert "62 more ranks not flagged" in text
    assert view.flagged_ranks == [37]
    from stance_magic.plots import figure_png

    assert len(figure_png(view.figure())) > 1000  # points, not 64 bars
    assert len(figure_png(_view(reps[:2]).figure())) > 1000


def test_the_combined_view_is_exported_with_rank_0s_report(tmp_path):
    from stance_magic.render import export

    rank0 = _rep(compiles=1, compile_s=0.1)
    rep = replace(rank0, ranks=_view([rank0, _rep(compiles=2, compile_s=0.2)]))
    path = export.write_json([rep], tmp_path / "h.json")
    data = json.loads(path.read_text())[0]["ranks"]
    assert data["world_size"] == 2 and [r["compiles"] for r in data["rows"]] == [1, 2]
    assert [f["kind"] for f in data["flags"]] == ["compiles", "slowest"]


@pytest.mark.integration
def test_the_gather_benchmark_still_runs(tmp_path):
    """benchmarks/bench_ranks.py --quick: two ranks, rank 0's work, no group."""
    out = tmp_path / "bench.json"
    script = ROOT / "benchmarks" / "bench_ranks.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=TORCHRUN_TIMEOUT_S,
        cwd=str(ROOT),
        env=_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for line in ("1. two ranks", "2. rank 0's own work", "projection", "3. no process group"):
        assert line in proc.stdout
    res = json.loads(out.read_text())
    assert res["two_ranks"]["0"]["summary_bytes"] < 2000
    assert res["projection"]["1024"]["summary_s"] > res["projection"]["64"]["summary_s"] > 0
    assert "recompiles" in res["rank0_work"]["1024"]["flags"]  # the one odd rank


def test_rank_sets_read_as_ranges():
    assert rank_set([3]) == "rank 3"
    assert rank_set([0, 1, 2, 5, 7, 8]) == "ranks 0-2, 5, 7-8"
