"""Sharing a cell: its structured trace read back by tlparse, its
Chrome-trace timeline against the report, the bug-report bundle."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
import torch

from stance_magic import share
from stance_magic.paths import short_path, shorten_paths
from stance_magic.share import run_tlparse, tlparse_command

from conftest import html_outputs, last, run, ui

#: the compile id in a structured-trace header
IDS = r'"frame_id": (\d+), "frame_compile_id": (\d+)'

needs_tlparse = pytest.mark.skipif(
    tlparse_command() is None, reason="tlparse is not installed (pip install tlparse)"
)

#: a compile in the cell before the traced one: it must not be in the trace
BEFORE = """
import models
def compiled_in_the_cell_before(x):
    return x.cos() * 2
torch.compile(compiled_in_the_cell_before, backend="eager")(torch.ones(3))
"""

GPT2 = """
gpt = models.gpt2()
cgpt = torch.compile(gpt, backend="eager")
ids = torch.randint(0, 256, (1, 8))
"""


def _tlparse_view(out: Path) -> dict[str, dict]:
    """What tlparse made of a trace, by compile id: its artifacts, the
    compilation_metrics it parsed (raw.jsonl) and its recompile reasons."""
    directory = json.loads((out / "compile_directory.json").read_text())
    view: dict[str, dict] = {}
    for key, entry in directory.items():
        m = re.fullmatch(r"\[(\d+)/(\d+)(?:_\d+)?\]", key)
        if not m:
            continue  # [-/-]: lines without a compile id (torch's version)
        cid = f"{m.group(1)}/{m.group(2)}"
        v = view.setdefault(cid, {"artifacts": [], "metrics": None, "reasons": ""})
        for a in entry["artifacts"]:
            v["artifacts"].append(a["name"])
            if a["name"].startswith("recompile_reasons_"):
                v["reasons"] += (out / a["url"]).read_text()
    for line in (out / "raw.jsonl").read_text().splitlines()[1:]:
        rec = json.loads(line)
        if "compilation_metrics" in rec:
            cid = f"{rec['frame_id']}/{rec['frame_compile_id']}"
            view[cid]["metrics"] = rec["compilation_metrics"]
    return view


@pytest.mark.integration
@needs_tlparse
def test_gpt2_cell_trace_read_by_tlparse_equals_the_report(shell, tmp_path, monkeypatch):
    """GPT-2 generating 8 -> 11 tokens under --trace: tlparse's compile ids,
    per-compile seconds and recompile reasons are the report's; the compile
    of the cell before is not in the trace; the report links tlparse's index."""
    pytest.importorskip("transformers")
    monkeypatch.chdir(tmp_path)
    shell.run_cell("import torch, stance_magic")
    assert shell.run_cell(BEFORE).success
    assert shell.run_cell(GPT2).success
    res, cap = run(shell, "%%stance default --trace traces\nout = models.generate(cgpt, ids, 3)")
    assert res.success, res.error_in_exec
    rep = last(shell)
    assert rep.shared.trace_file and Path(rep.shared.trace_file).parent == tmp_path / "traces"
    assert rep.shared.tlparse_index and Path(rep.shared.tlparse_index).name == "index.html"
    view = _tlparse_view(Path(rep.shared.tlparse_index).parent)

    # compile ids: tlparse's, the report's, the capture's; the cell before is absent
    ours = [f.compile_id for f in rep.frames]
    assert sorted(view) == sorted(ours) == sorted(rep.shared.trace_compile_ids)
    assert "0/0" not in view and "in_the_cell_before" not in Path(rep.shared.trace_file).read_text()
    assert len(ours) == 2 and len(rep.recompiles) == 1
    # per-compile seconds, as tlparse parsed torch's compilation_metrics
    for f in rep.frames:
        assert view[f.compile_id]["metrics"]["entire_frame_compile_time_s"] == pytest.approx(
            f.seconds, abs=1e-6
        )
    # what writing the trace cost, as torch counted it in the records tlparse read
    from stance_magic.render import fmt_s

    cost = sum(v["metrics"]["structured_logging_overhead_s"] for v in view.values())
    assert any(f"trace was on: {fmt_s(cost)} of the compile time" in n for n in rep.notes)
    # recompile reasons: the report's is the one tlparse shows for that compile
    for r in rep.recompile_details:
        assert r.reason in view[r.compile_id]["reasons"]
    # the report says where both are; in Jupyter the index is a link
    html = "".join(html_outputs(cap))
    href = Path(rep.shared.tlparse_index).relative_to(tmp_path).as_posix()
    assert f'<a href="{href}"' in html
    shown = str(rep)  # from the notebook's folder
    assert f"trace (2 compile ids): traces/{Path(rep.shared.trace_file).name}" in shown
    assert f"tlparse: {href}" in shown


@pytest.mark.integration
@needs_tlparse
def test_trace_of_a_cell_leaves_a_process_torch_trace_alone(tmp_path):
    """With TORCH_TRACE set for the process, its trace goes on (with this
    cell's compile in it) and the report says so; the cell's own file holds
    only the cell's compile."""
    code = """
import torch, stance_magic
f = torch.compile(lambda x: x.sin(), backend="eager")
f(torch.ones(2))
g = torch.compile(lambda x: x.tanh() + 1, backend="eager")
with stance_magic.measure("default", trace=%r) as rep:
    g(torch.ones(2))
print(rep.shared.trace_compile_ids, [n for n in rep.notes if "TORCH_TRACE" in n])
"""
    proc_dir = tmp_path / "process"
    env = dict(os.environ, TORCH_TRACE=str(proc_dir))
    done = subprocess.run(
        [sys.executable, "-c", code % str(tmp_path / "cell")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ids, notes = done.stdout.strip().splitlines()[-1].split("] ", 1)
    assert ids == "['1/0'"
    assert "left alone" in notes
    (process_log,) = proc_dir.iterdir()
    (cell_log,) = (tmp_path / "cell").glob("*.log")
    process_ids = set(re.findall(IDS, process_log.read_text()))
    cell_ids = set(re.findall(IDS, cell_log.read_text()))
    assert process_ids == {("0", "0"), ("1", "0")}
    assert cell_ids == {("1", "0")}
    parsed = run_tlparse(cell_log)
    assert parsed.index is not None, parsed.error


# --------------------------------------------------------------------------
# the timeline
# --------------------------------------------------------------------------

COUNTED = """
import models
calls = []
def counting(gm, example_inputs):
    def run(*args):
        calls.append(1)
        return gm.forward(*args)
    return run
def plain(x):
    return (x.sin() + 1).cos()
cplain = torch.compile(plain, backend=counting)
chatty = torch.compile(models.Chatty(), backend="eager")
"""


def _check_chrome_trace(data: dict) -> list[dict]:
    """The Chrome trace event format, as ui.perfetto.dev and chrome://tracing
    read it: a traceEvents list; every event a name, a phase, pid and tid;
    complete events (X) ts and dur in µs; instants (i) ts and a scope; spans
    on one track nest (none overlaps another partly)."""
    assert set(data) >= {"traceEvents"} and isinstance(data["traceEvents"], list)
    json.dumps(data, allow_nan=False)  # plain JSON, no NaN
    events = data["traceEvents"]
    for e in events:
        assert isinstance(e["name"], str) and e["name"]
        assert e["ph"] in {"X", "i", "M"}
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
            assert e["dur"] >= 0
        if e["ph"] == "i":
            assert isinstance(e["ts"], (int, float)) and e["s"] in {"t", "p", "g"}
        if e["ph"] == "M":
            assert e["name"] in {"process_name", "thread_name", "thread_sort_index"}
    by_track: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        if e["ph"] == "X":
            by_track.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():
        stack: list[float] = []
        for begin, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= begin + 1e-3:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, "spans on one track overlap"
            stack.append(end)
    return events


def test_timeline_events_match_the_report(sh, tmp_path):
    assert sh.run_cell(COUNTED).success
    path = tmp_path / "cell.json"
    cell = (
        f"%%stance default --timeline {path}\n"
        "for n in (2, 2, 3, 3):\n"
        "    cplain(torch.randn(n))\n"
        "for n in (2, 2):\n"
        "    chatty(torch.randn(n, 4))\n"
    )
    res, _ = run(sh, cell)
    assert res.success, res.error_in_exec
    rep = last(sh)
    assert rep.shared.timeline_file == str(path)
    events = _check_chrome_trace(json.loads(path.read_text()))

    def of(cat: str, ph: str = "X") -> list[dict]:
        return [e for e in events if e.get("cat") == cat and e["ph"] == ph]

    (cell_span,) = of("cell")
    assert cell_span["dur"] == pytest.approx(rep.wall_s * 1e6, abs=1)
    end = cell_span["dur"] + 1e3  # 1 ms: the clocks are read a few µs apart
    # compiles: one span each, the report's seconds, within the cell
    compiles = of("compile")
    assert len(compiles) == rep.compiles + rep.backward_compiles == len(rep.frames)
    assert sum(e["dur"] for e in compiles) == pytest.approx(rep.compile_s * 1e6, abs=1)
    assert {e["args"]["compile_id"] for e in compiles} == {f.compile_id for f in rep.frames}
    assert all(-1e3 <= e["ts"] and e["ts"] + e["dur"] <= end for e in compiles)
    # torch's own phases: each compile's entire_frame_compile, inside its span
    frames = {
        e["args"]["compile_id"]: e
        for e in of("dynamo_timed")
        if e["name"] == "entire_frame_compile"
    }
    for c in compiles:
        phase = frames[c["args"]["compile_id"]]
        assert phase["ts"] == pytest.approx(c["ts"], abs=1)
        assert phase["dur"] == pytest.approx(c["dur"], rel=0.02, abs=50)
    # lookups: the timed ones as spans summing to the report's, the rest instants
    timed, untimed = of("lookup"), of("lookup", "i")
    # (instants: the lookups not timed, and those counted only because they
    # waited for the CPU or ran under torch's profiler: every lookup is there)
    assert len(timed) == rep.lookups.timed
    assert len(untimed) == rep.lookups.untimed + rep.lookups.waited + rep.lookups.calibrated
    assert sum(e["dur"] for e in timed) == pytest.approx(rep.lookups.seconds * 1e6, rel=1e-6)
    hits = sum(1 for e in timed + untimed if e["args"]["result"] == "hit")
    assert hits == rep.cache_hits
    # graph breaks: one instant each, as counted in the report
    breaks = of("graph_break", "i")
    assert len(breaks) == sum(g.count for g in rep.graph_break_details) > 0
    assert all(0 <= e["ts"] <= end for e in breaks)
    # runs of compiled code: plain's, against the backend's own count of graph calls
    plain_ids = {f.compile_id for f in rep.frames if f.name == "plain"}
    runs = [e for e in of("compiled_run") if e["args"]["compile_id"] in plain_ids]
    assert len(plain_ids) == 2 and len(runs) == len(sh.user_ns["calls"]) == 4
    outside = [e for e in of("compiled_run") if not (0 <= e["ts"] and e["ts"] + e["dur"] <= end)]
    assert outside == [], (end, outside, [(e["name"], e["ts"], e["dur"]) for e in events])
    assert any("timeline on" in n for n in rep.notes)


def test_trace_and_timeline_options_are_checked_before_the_cell_runs(sh, tmp_path):
    (tmp_path / "file").write_text("x")
    for line, says in (
        (f"%%stance --trace {tmp_path / 'file'}", "not a directory"),
        (f"%%stance --timeline {tmp_path}", "directory"),
        (f"%%stance --timeline {tmp_path / 'no' / 'x.json'}", "no directory"),
        (f"%%stance --compare --trace {tmp_path}", "plain %%stance cell"),
    ):
        res, cap = run(sh, f"{line}\nran = True")
        assert not res.success and says in str(res.error_in_exec), (line, res.error_in_exec)
        assert "ran" not in sh.user_ns
    res, _ = run(sh, f"%stance --trace {tmp_path}")
    assert "go with a %%stance cell" in str(res.error_in_exec)


# --------------------------------------------------------------------------
# the bundle
# --------------------------------------------------------------------------


@pytest.mark.integration
@needs_tlparse
def test_bundle_lists_what_a_bug_report_needs_and_nothing_else(sh, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    secret = "s3cr3t-value-4242"
    monkeypatch.setenv("STANCE_MAGIC_TEST_SECRET", secret)
    home = os.path.expanduser("~")
    assert sh.run_cell(BEFORE).success
    sh.run_cell("x = torch.full((4,), -31337.25)\ntorch._dynamo.config.recompile_limit = 5")
    sh.run_cell(
        "def step(x, n):\n    return x * n + 1\ncstep = torch.compile(step, backend='eager')"
    )
    try:
        res, _ = run(
            sh, "%%stance default --trace traces\ncstep(x, 2)\ncstep(x, 3)\ncstep(x[:2], 3)"
        )
        assert res.success, res.error_in_exec
        rep = last(sh)
        res, cap = run(sh, "%stance bundle bug.zip")
        assert res.success, res.error_in_exec
    finally:
        torch._dynamo.config.recompile_limit = 8
    line = cap.stdout.strip()
    assert line.startswith("bug.zip: ") and "\n" not in line
    assert "trace (" in line and "tlparse output" in line
    with zipfile.ZipFile(tmp_path / "bug.zip") as z:
        names = z.namelist()
        texts = {n: z.read(n).decode("utf-8", "replace") for n in names}
    top = {n.split("/", 1)[0] for n in names}
    assert top == {
        "README.txt",
        "cell.py",
        "report.txt",
        "report.json",
        "versions.json",
        "stance.json",
        "trace",
        "tlparse",
    }
    assert texts["cell.py"] == rep.source
    # every row of the report, none folded (a short path aside, as the report shows it)
    assert "more with -v" not in texts["report.txt"]
    assert "\n  cache lookups " in texts["report.txt"] and "\n  wall time " in texts["report.txt"]
    assert json.loads(texts["report.json"])["compiles"] == rep.compiles == 3
    versions = json.loads(texts["versions.json"])
    assert versions["torch"] == torch.__version__ and versions["python"] == sys.version.split()[0]
    assert versions["backend_package"]["name"] == "torch"
    stance = json.loads(texts["stance.json"])
    assert stance["stance"] == "default"
    assert stance["torch._dynamo.config (changed from its defaults)"] == {"recompile_limit": 5}
    (trace_name,) = [n for n in names if n.startswith("trace/")]
    assert "tlparse/index.html" in names and "tlparse/compile_directory.json" in names
    for n in names:
        assert n in texts["README.txt"]
    # nothing it must not hold: no environment variable, no tensor, no long path
    everything = "\n".join(texts.values())
    assert secret not in everything and "STANCE_MAGIC_TEST_SECRET" not in everything
    # the tensor's value as torch or Python would print it, negative so no timestamp
    # holds it; bare digits are no test: the trace's ~160 microsecond timestamps
    # (1796320055834695) and hex hashes hold a given five digits now and then
    assert "-31337.25" not in everything and "-3.1337e+04" not in everything
    import stance_magic

    roots = {home, sys.prefix, str(tmp_path), os.getcwd(), str(Path(torch.__file__).parent)}
    roots.add(str(Path(stance_magic.__file__).parent.parent))  # an editable install
    roots.add(tempfile.gettempdir())
    for path in roots:
        assert path not in everything, path
    assert '"torch/_dynamo/' in texts[trace_name]  # torch's files as module paths
    assert "In [" in texts[trace_name]
    # only this cell's compiles
    ids = set(re.findall(IDS, texts[trace_name]))
    assert {f"{a}/{b}" for a, b in ids} == {f.compile_id for f in rep.frames}
    # the trace in the bundle still reads: tlparse made the bundle's output from it
    directory = json.loads(texts["tlparse/compile_directory.json"])
    assert any(k.startswith("[1/0") for k in directory)


def test_bundle_refuses_what_it_cannot_do(sh, tmp_path):
    res, _ = run(sh, f"%stance bundle {tmp_path / 'b.zip'}")
    assert "no measured cell" in str(res.error_in_exec)
    sh.run_cell("%%stance -q\nx = 1")
    (tmp_path / "dir.zip").mkdir()
    for arg, says in (
        ("", "usage"),
        (f"{tmp_path / 'b.tar'}", ".zip"),
        (f"{tmp_path / 'none' / 'b.zip'}", "cannot write"),
        (f"{tmp_path / 'dir.zip'}", "is a directory"),
    ):
        res, _ = run(sh, f"%stance bundle {arg}".rstrip())
        assert not res.success and says in str(res.error_in_exec), (arg, res.error_in_exec)
    assert [p.name for p in tmp_path.iterdir()] == ["dir.zip"]


def test_shorten_paths_as_the_report_does(tmp_path, monkeypatch):
    """The bundle's paths and the report's places follow one convention."""
    import site

    monkeypatch.chdir(tmp_path)
    sp = site.getsitepackages()[0]
    home = os.path.expanduser("~")
    text = (
        f'File "{sp}/torch/_dynamo/eval_frame.py", {tmp_path}/nb/x.py, {sys.prefix}/bin/python'
        f" {home}/elsewhere/y.py"
    )
    out = shorten_paths(text)
    assert 'File "torch/_dynamo/eval_frame.py"' in out
    assert short_path(f"{sp}/torch/_dynamo/eval_frame.py") == "torch/_dynamo/eval_frame.py"
    assert "./nb/x.py" in out and "<venv>/bin/python" in out
    assert home not in out and sp not in out and str(tmp_path) not in out


# --------------------------------------------------------------------------
# the panel's "trace next cell"
# --------------------------------------------------------------------------


@pytest.mark.integration
@needs_tlparse
def test_panel_traces_the_next_cell_only(sh, tmp_path, monkeypatch):
    pytest.importorskip("ipywidgets")
    import stance_magic
    from stance_magic.session.engine import get_engine

    monkeypatch.chdir(tmp_path)
    run(sh, "f = torch.compile(lambda x: x.sin() + 1, backend='eager')\nx = torch.ones(3)")
    p = stance_magic.panel()
    try:
        ui(p).trace_next.value = True
        assert get_engine().trace_next == share.PANEL_TRACE_DIR
        assert "next cell that runs is traced" in ui(p).message.value
        other = stance_magic.panel()  # a second panel follows the engine
        assert ui(other).trace_next.value is True
        res, cap = run(sh, "y = f(x)")  # a plain cell, not %%stance, watch off
        assert res.success, res.error_in_exec
        rep = last(sh)
        assert (
            rep.shared.trace_file
            and Path(rep.shared.trace_file).parent == tmp_path / "stance_traces"
        )
        assert rep.shared.trace_compile_ids == [f.compile_id for f in rep.frames] == ["0/0"]
        assert rep.shared.tlparse_index and "tlparse" in "".join(html_outputs(cap))
        assert ui(p).trace_next.value is False and ui(other).trace_next.value is False
        assert get_engine().trace_next is None
        n = len(stance_magic.history())
        run(sh, "y = f(torch.ones(4))")  # the cell after: not traced, not measured
        assert len(stance_magic.history()) == n
        assert len(list((tmp_path / "stance_traces").glob("*.log"))) == 1
        ui(p).trace_next.value = True
        ui(p).trace_next.value = False
        assert get_engine().trace_next is None and "off" in ui(p).message.value
    finally:
        p.close()
        other.close()


@pytest.mark.integration
def test_set_logs_inside_the_cell_keeps_its_trace(sh, tmp_path):
    """torch._logging.set_logs() sets torch's loggers up again and takes its own
    handlers off the trace logger, not ours: the trace goes on to the cell's end."""
    sh.run_cell("f = torch.compile(lambda x: x + 1, backend='eager')")
    sh.run_cell("g = torch.compile(lambda x: x - 1, backend='eager')")
    res, _ = run(
        sh,
        f"%%stance --trace {tmp_path}\n"
        "f(torch.ones(2))\ntorch._logging.set_logs()\ng(torch.ones(2))",
    )
    assert res.success, res.error_in_exec
    rep = last(sh)
    assert [f.compile_id for f in rep.frames] == ["0/0", "1/0"]
    assert rep.shared.trace_compile_ids == ["0/0", "1/0"]
    assert not any("the trace stops there" in n for n in rep.notes)
    from torch._logging._internal import trace_log

    assert not [h for h in trace_log.handlers if "probe.trace" in type(h).__module__]


def test_without_tlparse_the_report_says_so_and_keeps_the_trace(sh, tmp_path, monkeypatch):
    monkeypatch.setattr(share.trace, "tlparse_command", lambda: None)
    sh.run_cell("f = torch.compile(lambda x: x * 3, backend='eager')")
    res, cap = run(sh, f"%%stance --trace {tmp_path}\nf(torch.ones(2))")
    assert res.success, res.error_in_exec
    rep = last(sh)
    assert rep.shared.tlparse_index is None and Path(rep.shared.trace_file).exists()
    assert "tlparse: not installed (pip install tlparse)" in str(rep)
    assert f"trace (1 compile id): {rep.shared.trace_file}" in str(rep)  # outside the cwd: as it is


def test_profiler_spans_are_placed_through_the_shortest_anchor_ranges():
    """Runs of compiled code go on the cell's clock through stance_magic's
    anchor ranges (profiler clock ↔ perf_counter), the shortest of each
    group: a range stretched by preemption does not shift the timeline."""
    from stance_magic.probe import profiler

    class Range:
        def __init__(self, start, dur):
            self._s, self._d = start, dur

        def start_ns(self):
            return self._s

        def duration_ns(self):
            return self._d

    n = profiler.ANCHOR_TRIES
    assert n >= 2
    # the profiler's clock runs 5 s ahead of perf_counter(); the first start
    # range was preempted for 4 ms, its perf reading taken at its end
    starts = [Range(5_000_000_000 + 4_000_000 * 0, 4_000_000)] + [
        Range(5_004_100_000 + 1000 * k, 200) for k in range(n - 1)
    ]
    perf_start = [0.004] + [0.0041 + 1e-6 * k + 1e-7 for k in range(n - 1)]
    ends = [Range(5_104_000_000 + 1000 * k, 200) for k in range(n)]
    perf_end = [0.104 + 1e-6 * k + 1e-7 for k in range(n)]
    spans = [("0/0", 5_050_000_000, 2_000_000)]
    ((cid, start, dur),) = profiler._on_perf_clock(starts + ends, perf_start + perf_end, spans)
    assert cid == "0/0"
    assert start == pytest.approx(0.050, abs=1e-7) and dur == pytest.approx(0.002, rel=1e-6)
    # without both groups of anchors: nothing rather than a guess
    assert profiler._on_perf_clock(starts, perf_start, spans) == []
