"""Warm starts: the compile caches' figures against torch's records,
its counters and the cache directory's files; save → fresh process → load →
hits; files from another torch, truncated or corrupt, refused cleanly.

The tests marked ``inductor`` share one tiny model compiled once with Inductor
(about 20 s for the first compile of a process here) in a cache directory of
their own; the others need no compile.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import warm_worker
from torch.compiler._cache import CacheArtifactManager

import stance_magic
from stance_magic.builder import compile_caches
from stance_magic.probe import caches as probe_caches
from stance_magic.report import CellReport, FrameCompile
from stance_magic.report.warm import CacheInfo
from stance_magic.session import warm
from stance_magic.session.engine import get_engine
from stance_magic.text import fmt_s

from conftest import has_row, run, text_outputs

HERE = Path(__file__).resolve().parent
WORKER = HERE / "warm_worker.py"


# --------------------------------------------------------------------------
# Files: refusals that need no compile
# --------------------------------------------------------------------------


def _write(path: Path, blob: bytes, **header) -> Path:
    head = {
        "format": warm.FORMAT,
        "torch": torch.__version__,
        "blob_bytes": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "artifacts": {},
    }
    head.update(header)
    path.write_bytes(warm.MAGIC + json.dumps(head).encode() + b"\n" + blob)
    return path


def _with_kernels(path: Path, blob: bytes, kernels: list[tuple[str, bytes]], **header) -> Path:
    """A format-2 file: ``blob`` and then ``kernels``, the header listing them."""
    tail = b"".join(data for _, data in kernels)
    _write(
        path,
        blob,
        kernels=[[rel, len(data)] for rel, data in kernels],
        kernels_sha256=hashlib.sha256(tail).hexdigest(),
        **{"platform": probe_caches.kernel_platform(), **header},
    )
    path.write_bytes(path.read_bytes() + tail)
    return path


@pytest.fixture
def fresh_dir(tmp_path, monkeypatch):
    """An empty Inductor cache directory for this test."""
    d = tmp_path / "inductor-cache"
    d.mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(d))
    return d


def _refused(path, capfd, caplog) -> str:
    before = dict(warm.loaded_keys())
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        with pytest.raises(warm.WarmStartError) as err:
            stance_magic.load_cache(path)
    msg = str(err.value)
    assert "\n" not in msg
    out, errs = capfd.readouterr()
    assert "Traceback" not in out + errs
    assert not [r for r in caplog.records if r.name.startswith("torch")], caplog.records
    assert warm.loaded_keys() == before
    return msg


def _files(d: Path) -> list[Path]:
    return [p for p in d.rglob("*") if p.is_file()]


def test_refusals_before_torch_reads_anything(tmp_path, fresh_dir, capfd, caplog):
    not_ours = tmp_path / "raw.bin"
    not_ours.write_bytes(b"\x01\x00\x00\x00\x00\x00\x00\x00garbage")
    assert "not a stance_magic cache file" in _refused(not_ours, capfd, caplog)

    other = _write(tmp_path / "other.smcache", b"x" * 10, torch="2.12.0")
    msg = _refused(other, capfd, caplog)
    assert f"saved by torch 2.12.0; this is torch {torch.__version__}" in msg
    assert "nothing was loaded" in msg

    newer = _write(tmp_path / "newer.smcache", b"x", format=warm.FORMAT + 1)
    assert "newer stance_magic" in _refused(newer, capfd, caplog)

    good = _write(tmp_path / "cut.smcache", b"y" * 100)
    good.write_bytes(good.read_bytes()[:-10])
    assert "truncated" in _refused(good, capfd, caplog)

    flipped = _write(tmp_path / "flip.smcache", b"z" * 100)
    data = bytearray(flipped.read_bytes())
    data[-5] ^= 0xFF
    flipped.write_bytes(bytes(data))
    assert "checksum" in _refused(flipped, capfd, caplog)

    broken = tmp_path / "head.smcache"
    broken.write_bytes(warm.MAGIC + b"{not json\n" + b"blob")
    assert "header cannot be read" in _refused(broken, capfd, caplog)

    assert "no file" in _refused(tmp_path / "missing.smcache", capfd, caplog)
    assert _files(fresh_dir) == []


def test_blob_torch_cannot_read_is_refused_without_traceback(tmp_path, fresh_dir, capfd, caplog):
    # a valid header and checksum around bytes torch's reader rejects: its
    # own load_cache_artifacts would log a warning with a traceback
    for blob in (b"\x00" * 3, b"\x01" + b"\x00" * 7 + b"\xff" * 40):
        path = _write(tmp_path / "bad.smcache", blob)
        msg = _refused(path, capfd, caplog)
        assert "torch cannot read its artifacts" in msg and "nothing was loaded" in msg
    assert _files(fresh_dir) == []


def test_nothing_to_save_after_eager_compiles(tmp_path):
    f = torch.compile(lambda x: x.sin() + 1, backend="eager")
    with CacheArtifactManager.with_fresh_cache():
        f(torch.ones(3))
        with pytest.raises(warm.WarmStartError, match="nothing to save") as err:
            stance_magic.save_cache(tmp_path / "none.smcache")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "none.smcache").exists()


def test_torch_without_the_api_says_which_release(tmp_path, monkeypatch):
    monkeypatch.delattr(torch.compiler, "save_cache_artifacts")
    for call in (stance_magic.save_cache, stance_magic.load_cache):
        with pytest.raises(warm.WarmStartError) as err:
            call(tmp_path / "x.smcache")
        msg = str(err.value)
        assert "\n" not in msg and "arrived in torch 2.7" in msg and torch.__version__ in msg
    monkeypatch.undo()
    monkeypatch.setattr(probe_caches, "torch_version", lambda: (2, 6))
    assert "arrived in torch 2.7" in probe_caches.mega_cache_problem()


def test_magic_usage_and_refusal_are_one_line(sh, tmp_path):
    for line in (
        "%stance cache",
        "%stance cache save",
        "%stance cache dump x",
        "%stance cache load",
    ):
        res, cap = run(sh, line)
        assert not res.success and "usage: %stance cache save PATH" in str(res.error_in_exec)
    res, cap = run(sh, f"%stance cache load {tmp_path / 'missing.smcache'}")
    err = res.error_in_exec
    assert type(err).__name__ == "UsageError" and "\n" not in str(err)
    assert str(err).startswith("%stance cache load: no file")
    assert "Traceback" not in cap.stdout + cap.stderr


def test_lazy_api_names():
    assert stance_magic.save_cache is warm.save_cache
    assert stance_magic.load_cache is warm.load_cache
    assert stance_magic.CacheInfo is CacheInfo
    assert {"save_cache", "load_cache"} <= set(stance_magic.__all__)


# --------------------------------------------------------------------------
# The report's cache figures, from hand-made records (no compile)
# --------------------------------------------------------------------------


def _rec(cid, forward=True, start=1_000_000, **counts):
    fields = {
        "compile_id": cid,
        "co_name": "forward" if forward else None,
        "is_forward": forward,
        "is_runtime": False,
        "fail_type": None,
        "start_time_us": start,
        "duration_us": 1_000_000,
        "entire_frame_compile_time_s": 1.0 if forward else None,
    }
    fields.update(counts)
    return SimpleNamespace(**fields)


def _frame(cid, kind="frame", seconds=2.0, dynamo=0.5):
    return FrameCompile(
        cid, kind, "Block.forward", "In [3]", 1, seconds, {"dynamo": dynamo}, 3, None
    )


def _with_caches(rep, window, events, history, loaded=None):
    """``rep`` with its compile-cache figures, as the builder makes them."""
    frames, caches = compile_caches(rep.frames, window, events, history, loaded)
    return replace(rep, frames=frames, compile_caches=caches)


def _event(cache, state, key, cid="0/0", t_us=1_500_000, **kw):
    return probe_caches.CacheEvent(cache, state, key, cid, t_us * 1000, **kw)


def test_cold_then_warm_verdict_names_the_cold_cell():
    cold = CellReport(execution_count=4, frames=[_frame("0/0", seconds=7.9, dynamo=0.1)])
    window = SimpleNamespace(
        records=[
            _rec("0/0", inductor_fx_local_cache_miss_count=1, aotautograd_local_cache_miss_count=1)
        ]
    )
    events = [_event("aot_autograd", "miss", "akey"), _event("inductor", "miss", "fkey")]
    cold = _with_caches(cold, window, events, [])
    assert (
        cold.compile_caches.fx_misses,
        cold.compile_caches.aot_misses,
        cold.compile_caches.state,
    ) == (1, 1, "cold")
    assert cold.compile_caches.generated_s == pytest.approx(7.8)
    assert cold.compile_caches.verdict.startswith("cold: 1 graph generated (FX graph cache: 1 miss")

    warm_rep = CellReport(execution_count=9, frames=[_frame("0/0", seconds=0.5, dynamo=0.1)])
    window = SimpleNamespace(
        records=[
            _rec("0/0", inductor_fx_local_cache_hit_count=1, aotautograd_local_cache_hit_count=1)
        ]
    )
    events = [_event("aot_autograd", "hit", "akey", saved_s=7.5)]
    warm_rep = _with_caches(warm_rep, window, events, [cold], loaded={"akey": "w.smcache"})
    assert (
        warm_rep.compile_caches.state == "warm"
        and warm_rep.compile_caches.loaded_s == pytest.approx(0.4)
    )
    v = warm_rep.compile_caches.verdict
    assert v.startswith("warm: 1 of 1 graphs loaded from the FX graph cache")
    assert "a cold compile of the same graphs took 7.90 s in In [4]" in v
    assert warm_rep.compile_caches.loaded_from == "w.smcache" and v.endswith("from w.smcache")
    row = warm_rep.summary_row()
    assert row["fx_cache_hits"] == 1 and row["cache_state"] == "warm"
    assert row["cache_saved_s"] == pytest.approx(7.5)
    text = warm_rep.text(verbose=True)
    assert "compile caches" in text and "AOTAutograd cache 1 hit" in text
    assert "(torch recorded 7.50 s generating it)" in text


def test_bypass_reason_and_caches_off():
    rep = CellReport(frames=[_frame("1/0")])
    window = SimpleNamespace(records=[_rec("1/0")])
    events = [
        _event("inductor", "bypass", "", cid="1/0", reason="Unsupported post grad custom pass")
    ]
    rep = _with_caches(rep, window, events, [])
    assert rep.compile_caches.fx_bypasses == 1 and rep.compile_caches.state == "cold"
    assert "1 bypass (Unsupported post grad custom pass)" in rep.compile_caches.verdict
    assert "FX graph cache bypassed: Unsupported post grad custom pass" in rep.text(verbose=True)

    off = CellReport(frames=[_frame("2/0")])
    off = _with_caches(
        off,
        SimpleNamespace(records=[_rec("2/0")]),
        [_event("inductor", "disabled", "", cid="2/0")],
        [],
    )
    assert (
        off.compile_caches.state == "caches off" and "FX graph cache" in off.compile_caches.verdict
    )
    # the data names the cache as torch does; the words are render's
    assert off.compile_caches.off == ["inductor"]
    assert "caches off (FX graph cache)" in off.text(verbose=True)
    # an event of another compile, or outside this record's time, is not its
    other = CellReport(frames=[_frame("3/0")])
    other = _with_caches(
        other,
        SimpleNamespace(records=[_rec("3/0")]),
        [_event("inductor", "bypass", "", cid="2/0"), _event("inductor", "bypass", "", "3/0", 9e9)],
        [],
    )
    assert other.compile_caches.verdict == "" and other.compile_caches.fx_bypasses == 0


def test_eager_backend_has_no_cache_row(sh):
    sh.run_cell("f = torch.compile(lambda x: x.cos() * 2, backend='eager')")
    res, cap = run(sh, "%%stance --no-plot\nf(torch.ones(3))")
    rep = sh.user_ns["stance_magic"].history()[-1]
    assert rep.compiles == 1 and rep.compile_caches.verdict == "" and rep.compile_caches.state == ""
    assert "compile caches" not in "\n".join(text_outputs(cap))
    assert "caches" not in str(sh.user_ns["stance_magic"].history())


# --------------------------------------------------------------------------
# Truth tests with Inductor: one tiny model, one cache directory
# --------------------------------------------------------------------------


_records_during = warm_worker.records_during


def _measure_step(cmodel, x):
    from torch._dynamo.utils import get_compilation_metrics

    before = probe_caches.counters_snapshot()
    records = _records_during(get_compilation_metrics, warm_worker.step, cmodel, x)
    rep = records.pop()
    now = probe_caches.counters_snapshot()
    return warm_worker.figures(rep, records, {k: now[k] - before[k] for k in now}), rep


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """The tiny model compiled once, cold, in a cache directory of its own."""
    d = tmp_path_factory.mktemp("inductor-cache")
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(d)
    torch.compiler.reset()
    get_engine().clear_history()
    with CacheArtifactManager.with_fresh_cache():
        model, x = warm_worker.make()
        cmodel = torch.compile(model)
        fig, rep = _measure_step(cmodel, x)
        yield SimpleNamespace(dir=d, fig=fig, rep=rep, model=model, x=x, cmodel=cmodel)
    torch.compiler.reset()
    get_engine().clear_history()
    if saved is None:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved


def _worker(env_dir: Path, *args: str) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(env_dir)}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), str(HERE)])
    proc = subprocess.run(
        [sys.executable, str(WORKER), *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=str(HERE),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _phases_agree_with_torch(fig: dict, path: str) -> None:
    """Each compile's phases, against the fields of torch's record: Dynamo is
    its cumulative time less the backend call (AOTAutograd's cumulative
    field, which times the whole call), Inductor and code generation its
    own fields, AOTAutograd the rest of the backend call; they add up to
    the record's total."""
    assert fig["phases"], path
    for p in fig["phases"]:
        ours, t = p["ours"], p["torch"]
        us = {k: (v or 0) / 1e6 for k, v in t.items() if k.endswith("_us")}
        where = f"{path}, {p['kind']}: ours {ours}, torch's {t}"
        assert ours["codegen"] == pytest.approx(us["codegen_us"], abs=1e-6), where
        assert ours["backend"] + ours["codegen"] == pytest.approx(us["inductor_us"], abs=1e-6), (
            where
        )
        if p["kind"] == "frame":
            assert ours["dynamo"] == pytest.approx(us["dynamo_us"] - us["aot_us"], abs=1e-6), where
            backend_call = ours["aot_autograd"] + ours["backend"] + ours["codegen"]
            assert backend_call == pytest.approx(us["aot_us"], abs=1e-6), where
        assert sum(ours.values()) == pytest.approx(t["total_s"], abs=1e-6), where


@pytest.mark.inductor
def test_the_phases_agree_with_torchs_records_on_every_cache_path(cold, tmp_path):
    """Cold (both caches miss), an AOTAutograd cache hit (a second process:
    AOTAutograd loads the graphs, Inductor times nothing, and the time is
    AOTAutograd's), and an FX graph cache hit alone (the AOTAutograd cache
    turned off)."""
    _phases_agree_with_torch(cold.fig, "cold")
    warm = _worker(cold.dir)
    assert warm["report"]["aot_hits"] == 1
    hit = next(p for p in warm["phases"] if p["kind"] == "frame")
    assert not hit["torch"]["inductor_us"] and hit["ours"]["backend"] == 0.0
    assert hit["ours"]["aot_autograd"] > 0
    _phases_agree_with_torch(warm, "AOTAutograd cache hit")
    d = tmp_path / "inference-cache"
    d.mkdir()
    first = _worker(d, "--no-aot-cache")
    _phases_agree_with_torch(first, "cold, no AOTAutograd cache")
    again = _worker(d, "--no-aot-cache")
    assert again["report"]["fx_hits"] >= 1 and again["report"]["aot_hits"] == 0
    _phases_agree_with_torch(again, "FX graph cache hit")


@pytest.mark.inductor
def test_cold_compile_misses_match_torch_records_counters_and_files(cold):
    fig = cold.fig
    rec, cnt, rep = fig["records"], fig["counters"], fig["report"]
    # forward + lazily compiled backward: two FX graphs, one AOTAutograd entry
    assert rep["fx_misses"] == rec["inductor_miss"] == cnt["inductor_miss"] == 2
    assert rep["aot_misses"] == rec["aot_autograd_miss"] == cnt["aot_autograd_miss"] == 1
    assert rep["fx_hits"] == rep["aot_hits"] == rec["inductor_hit"] == 0
    assert rep["state"] == "cold" and rep["verdict"].startswith("cold: 2 graphs generated")
    # each miss wrote its entry, under the key torch logged, into this directory
    assert fig["cache_dir"] == str(cold.dir)
    assert len(fig["keys"]["inductor"]) == 2 and all(fig["files"]["inductor"])
    assert len(fig["keys"]["aot_autograd"]) == 1 and all(fig["files"]["aot_autograd"])
    assert rep["generated_s"] == pytest.approx(rep["compile_s"] - rep["dynamo_s"], rel=1e-6)


@pytest.mark.timing  # torch's figure for what the hit saved, against the cold compile's clock
@pytest.mark.inductor
def test_warm_compile_in_the_same_process_hits_and_names_the_cold_cell(cold):
    torch.compiler.reset()
    fig, rep = _measure_step(cold.cmodel, cold.x)
    r, rec, cnt = fig["report"], fig["records"], fig["counters"]
    assert r["aot_hits"] == rec["aot_autograd_hit"] == cnt["aot_autograd_hit"] == 1
    # the AOTAutograd entry loads both FX graphs (no backward compile follows)
    assert r["fx_hits"] == rec["inductor_hit"] == 2 and r["fx_misses"] == 0
    assert r["state"] == "warm" and rep.backward_compiles == 0
    assert fig["keys"]["aot_autograd"] == cold.fig["keys"]["aot_autograd"]
    cold_cell = f"cell {cold.rep.index}"
    assert (
        f"a cold compile of the same graphs took {fmt_s(cold.rep.compile_s)} in {cold_cell}"
        in (r["verdict"])
    )
    # torch's own figure for what the hit saved, against the cold compile
    assert 0.5 * cold.rep.compile_caches.generated_s <= r["saved_s"] <= 1.05 * cold.rep.compile_s
    assert r["loaded_s"] < cold.rep.compile_caches.generated_s


@pytest.mark.inductor
def test_emptied_cache_directory_misses_again(cold):
    for sub in ("fxgraph", "aotautograd"):
        shutil.rmtree(cold.dir / sub, ignore_errors=True)
    torch.compiler.reset()
    fig, _ = _measure_step(cold.cmodel, cold.x)
    r, rec = fig["report"], fig["records"]
    assert r["fx_misses"] == rec["inductor_miss"] == 2 and r["fx_hits"] == 0
    assert r["aot_misses"] == rec["aot_autograd_miss"] == 1 and r["state"] == "cold"
    assert all(fig["files"]["inductor"])  # written again


@pytest.mark.inductor
def test_second_process_with_the_same_directory_hits(cold):
    fig = _worker(cold.dir)
    r, rec, cnt = fig["report"], fig["records"], fig["counters"]
    assert r["aot_hits"] == rec["aot_autograd_hit"] == cnt["aot_autograd_hit"] == 1
    assert r["fx_hits"] == rec["inductor_hit"] == 2 and r["fx_misses"] == 0
    assert r["state"] == "warm" and has_row(fig["text"], "compile caches", "warm: 2 of 2 graphs")
    assert fig["keys"]["aot_autograd"] == cold.fig["keys"]["aot_autograd"]
    assert all(fig["files"]["aot_autograd"])


@pytest.mark.inductor
def test_save_then_fresh_process_load_hits(cold, tmp_path, capfd, caplog):
    path = tmp_path / "tiny.smcache"
    info = stance_magic.save_cache(path)
    # the C++ binaries Inductor built for the cold compile (its kernels and
    # its CPU-feature checks): those in its directory
    built = sorted(p.name for p in cold.dir.rglob("*.so"))
    assert built and info.counts == {"inductor": 2, "aot_autograd": 1, "kernels": len(built)}
    assert info.file_bytes == path.stat().st_size
    header, blob = warm.read_cache_file(path)
    assert header["torch"] == torch.__version__ and header["artifacts"] == info.counts
    assert sorted(Path(rel).name for rel, _ in header["kernels"]) == built
    kernel_bytes = sum(p.stat().st_size for p in cold.dir.rglob("*.so"))
    assert info.kind_bytes["kernels"] == kernel_bytes
    artifact_bytes = sum(a.nbytes for a in probe_caches.parse_artifacts(blob))
    assert info.nbytes == artifact_bytes + kernel_bytes
    assert artifact_bytes < len(blob) and len(blob) + kernel_bytes < info.file_bytes
    assert f"saved 3 compile-cache artifacts and {len(built)} compiled C++ binaries" in str(info)
    assert "2 Inductor FX graphs" in str(info) and "1 AOTAutograd entry" in str(info)
    assert f"{len(built)} compiled C++ binaries" in str(info)

    fresh = tmp_path / "fresh-cache"
    fresh.mkdir()
    fig = _worker(fresh, "--load", str(path))
    assert fig["loaded"]["counts"] == info.counts and fig["loaded"]["cache_dir"] == str(fresh)
    # the binaries came with the file: torch's builder ran no C++ build
    assert fig["cpp_builds"] == 0, fig["cpp_built"]
    if fig["load_ok_markers"]:
        # nor, where torch keeps the outcome of its CPU-feature probes beside
        # their binaries, a probe: the file's checks came marked as loading
        assert header["load_ok"], header["kernels"]
        assert fig["isa_probes"] == 0
    assert sorted(p.name for p in fresh.rglob("*.so")) == built
    r, rec = fig["report"], fig["records"]
    assert (
        r["aot_hits"] == rec["aot_autograd_hit"] == 1 and r["fx_hits"] == rec["inductor_hit"] == 2
    )
    assert r["fx_misses"] == r["aot_misses"] == 0 and r["state"] == "warm"
    assert r["loaded_from"] == str(path) and str(path) in r["verdict"]
    assert fig["cache_dir"] == str(fresh) and all(fig["files"]["aot_autograd"])

    # the same file, damaged or from another torch: refused, nothing loaded
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(empty)
    try:
        data = path.read_bytes()
        head_end = data.index(b"\n", len(warm.MAGIC)) + 1
        other = json.loads(data[len(warm.MAGIC) : head_end])
        other["torch"] = "2.12.0"
        bad = tmp_path / "other.smcache"
        bad.write_bytes(warm.MAGIC + json.dumps(other).encode() + b"\n" + blob)
        assert "saved by torch 2.12.0" in _refused(bad, capfd, caplog)
        flipped = bytearray(data)
        flipped[head_end + len(blob) // 2] ^= 0x55
        bad.write_bytes(bytes(flipped))
        assert "checksum" in _refused(bad, capfd, caplog)
        bad.write_bytes(data[: head_end + len(blob) // 3])
        assert "truncated" in _refused(bad, capfd, caplog)
        flipped = bytearray(data)
        flipped[-1] ^= 0x55  # in the last kernel
        bad.write_bytes(bytes(flipped))
        assert "compiled binaries do not match" in _refused(bad, capfd, caplog)
        # torch's blob cut short, with a header that matches it
        _write(bad, blob[: len(blob) // 2])
        assert "torch cannot read its artifacts" in _refused(bad, capfd, caplog)
        assert _files(empty) == []
    finally:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cold.dir)


@pytest.mark.inductor
def test_kernels_are_placed_only_where_they_load(cold, tmp_path, monkeypatch):
    """A file without the compiled kernels (format 1, as files were) has a
    fresh process build them; kernels from another platform, or that this
    machine cannot load, are left out with one line saying so."""
    path = tmp_path / "tiny.smcache"
    stance_magic.save_cache(path)
    header, blob, kernels = warm._read(path)
    assert kernels and header["platform"] == probe_caches.kernel_platform()
    old = _write(tmp_path / "old.smcache", blob, format=1, artifacts=header["artifacts"])
    fresh = tmp_path / "old-fresh"
    fresh.mkdir()
    fig = _worker(fresh, "--load", str(old))
    assert fig["loaded"]["counts"] == {"inductor": 2, "aot_autograd": 1}
    assert fig["cpp_builds"] >= len(kernels)

    elsewhere = _with_kernels(tmp_path / "arm.smcache", blob, kernels, platform="linux-aarch64")
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(empty))
    info = stance_magic.load_cache(elsewhere)
    assert "kernels" not in info.counts and not list(empty.rglob("*.so"))
    assert info.notes == [
        f"the file's {len(kernels)} compiled C++ binaries were built on linux-aarch64; this "
        f"is {probe_caches.kernel_platform()}: Inductor builds them again here"
    ]

    broken = ("zz/czzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz.main.so", b"not a shared object")
    mixed = _with_kernels(tmp_path / "mixed.smcache", blob, [*kernels, broken])
    other = tmp_path / "other-cache"
    other.mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(other))
    info = stance_magic.load_cache(mixed)
    assert info.counts["kernels"] == len(kernels)
    assert sorted(p.name for p in other.rglob("*.so")) == sorted(Path(r).name for r, _ in kernels)
    assert info.notes == [
        f"1 of the file's {len(kernels) + 1} compiled C++ binaries do not load on this machine "
        "(a missing library?): Inductor builds them again here"
    ]
    # loaded again: they are there already, nothing written
    again = stance_magic.load_cache(mixed)
    assert again.counts["kernels"] == len(kernels)


def test_history_columns_chart_and_export_carry_the_cache_figures(tmp_path):
    from stance_magic.plots import history_figure
    from stance_magic.render import History, export

    cold = CellReport(index=1, execution_count=4, frames=[_frame("0/0", seconds=7.9)])
    cold = _with_caches(
        cold,
        SimpleNamespace(records=[_rec("0/0", inductor_fx_local_cache_miss_count=1)]),
        [_event("inductor", "miss", "fkey")],
        [],
    )
    hot = CellReport(index=2, execution_count=5, frames=[_frame("0/0", seconds=0.3)])
    hot = _with_caches(
        hot,
        SimpleNamespace(records=[_rec("0/0", inductor_fx_local_cache_hit_count=1)]),
        [_event("inductor", "hit", "fkey", saved_s=7.0)],
        [cold],
    )
    cold, hot = (
        replace(
            r,
            compiles=1,
            wall_s=sum(f.seconds for f in r.frames),
            compile_s=sum(f.seconds for f in r.frames),
        )
        for r in (cold, hot)
    )
    hist = History([cold, hot])
    text = str(hist)
    assert "caches (FX)" in text
    assert "cold 0/1" in text.splitlines()[2]
    assert "warm 1/0" in text.splitlines()[3]
    fig = history_figure(hist)
    labels = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "cold" in labels and "warm" in labels
    export.write_exports(hist, tmp_path / "h.csv", tmp_path / "h.json")
    head = (tmp_path / "h.csv").read_text().splitlines()[0].split(",")
    new = [
        "fx_cache_hits",
        "fx_cache_misses",
        "fx_cache_bypasses",
        "aot_cache_hits",
        "aot_cache_misses",
        "aot_cache_bypasses",
        "cache_state",
        "cache_loaded_s",
        "cache_generated_s",
        "cache_saved_s",
        "cache_loaded_from",
        "cache_verdict",
    ]
    # the earlier keys keep their place; the new ones follow them
    at = head.index("error") + 1
    assert head == list(hot.summary_row()) and head[at : at + len(new)] == new
    data = json.loads((tmp_path / "h.json").read_text())
    assert data[1]["frames"][0]["caches"][0]["hits"] == 1
    assert data[1]["compile_caches"]["verdict"] == hot.compile_caches.verdict


def test_cache_watch_stays_idle_between_cells_and_unload_removes_it(shell):
    from torch._dynamo.utils import CompileEventLogger

    watch = probe_caches.watch()
    shell.run_cell("import torch, stance_magic")
    shell.run_cell("%%stance -q\npass")
    fn = CompileEventLogger.__dict__["instant"].__func__
    assert watch.installed and getattr(fn, "_stance_magic_wraps", None) is not None
    # idle between cells: an event outside a window is passed on, not kept
    CompileEventLogger.instant("fx_graph_cache_hit", {"key": "k"})
    assert watch._events == [] and watch._open == 0
    mark = watch.start()
    CompileEventLogger.instant("fx_graph_cache_hit", {"key": "k", "time_saved_ns": 2e9})
    (ev,) = watch.stop(mark)
    assert (ev.cache, ev.state, ev.key, ev.saved_s) == ("inductor", "hit", "k", 2.0)
    shell.run_cell("%unload_ext stance_magic")
    now = CompileEventLogger.__dict__["instant"].__func__
    assert not watch.installed and not hasattr(now, "_stance_magic_wraps")
    shell.run_cell("%load_ext stance_magic")  # the fixture unloads it again


@pytest.mark.inductor
def test_bypass_reason_is_torchs(cold):
    """A custom post-grad pass that Inductor cannot hash makes it bypass the
    FX graph cache: the report gives torch's reason and its counter's count."""
    import torch._inductor.config as iconf
    from torch._dynamo.utils import get_compilation_metrics

    f = torch.compile(lambda t: (t * 3).cos().sum())
    before = probe_caches.counters_snapshot()
    # torch's patch(), not monkeypatch: see test_report.test_inductor_phases
    with iconf.patch(post_grad_custom_post_pass=lambda graph: None):
        records = _records_during(get_compilation_metrics, f, torch.ones(5))
    rep = records.pop()
    grown = {k: v - before[k] for k, v in probe_caches.counters_snapshot().items()}
    assert rep.compile_caches.fx_bypasses == grown[("inductor", "bypass")] == 1
    assert rep.compile_caches.fx_hits == rep.compile_caches.fx_misses == 0
    assert sum(probe_caches.record_count(r, "inductor", "miss") for r in records) == 0
    # AOTAutograd's cache bypasses too, for the same reason (its key hashes
    # Inductor's config)
    assert rep.compile_caches.aot_bypasses == grown[("aot_autograd", "bypass")]
    n = rep.compile_caches.fx_bypasses + rep.compile_caches.aot_bypasses
    assert rep.compile_caches.bypass_reasons == ["Unsupported post grad custom pass"] * n
    assert f"{n} bypass{'es' if n > 1 else ''} (Unsupported post grad custom pass)" in (
        rep.compile_caches.verdict
    )
    assert "FX graph cache bypassed: Unsupported post grad custom pass" in rep.text(verbose=True)
