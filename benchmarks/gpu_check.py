"""The GPU check: stance_magic's CUDA tests and CUDA figures, in one run of under 8 minutes.

Run from the repository root on a machine with an NVIDIA GPU and a CUDA build
of torch (2.8 or later)::

    python benchmarks/gpu_check.py                 # figures to $OUT, else ./gpu_check_out
    python benchmarks/gpu_check.py --out DIR       # figures to DIR
    python benchmarks/gpu_check.py --quick         # the in-process figures only (~1 min)

Without a CUDA device it prints ``no CUDA device: nothing to check``, writes
``gpu_check.json`` saying so, and exits 0.

What it does, each step bounded by what is left of ``--budget`` (450 s); steps
1-4 run in this process in an Inductor cache directory of their own (so the
first compile is cold), in the order 4, 1, 2, 3, then the parts of a call;
then 6 and 5:

1. **Synchronized timings** (GPT-2 from a config, ``tests/models.py``, on
   the GPU, 256 wide over 16×64 tokens and 1024 wide over 64×64):
   ``--compare``'s eager and compiled medians and speedup as stance_magic
   measures them (synchronized), and with ``probe.sync_if_cuda`` switched
   off (kernel launches only), beside CUDA events around one eager and one
   compiled run. Then torch alone: what reading an output kept from an
   earlier ``reduce-overhead`` call does (a warm-up run's after the
   recording; a replay's after the next).
2. **CUDA graphs** (``mode="reduce-overhead"``): a fixed-shape block (recorded,
   replayed), a changing batch size (recordings for new sizes and the hint), a
   function that mutates its input and one given CPU tensors (skips, with
   torch's reasons and the user's line); each report's text is kept.
3. **CUDA memory**: a measured block's CUDA peak and reserved bytes against
   ``torch.cuda.max_memory_allocated()`` / ``max_memory_reserved()`` read
   independently around the same work (a 256 MB temporary, a GPT-2 forward).
4. **Compile phases**: the named parts of a cold GPT-2 compile (Triton kernel
   compilation) and of a ``max-autotune-no-cudagraphs`` matmul (autotuning).
   Then **a compiled call's parts** (GPT-2 over 16×64 and 1×8 tokens, one
   ``x + 1``, three 4096×4096 matrix products; 3 rounds): the report's host
   parts and its compiled code on the GPU against the outside clock with and
   without waiting for the GPU, CUDA events around each call, torch's
   profiler's lookup, compiled region and kernels.
5. **The CUDA tests**: ``pytest -m cuda`` over the test files that hold them
   (needs IPython; an Inductor cache of their own; output kept), among them
   a training loop that never calls backward (graphs held in warm-up), a
   warm-up output read after the recording overwrote it, and a skip of a
   graph loaded from another process's compile cache.
6. **Warm start**, in fresh processes (GPT-2 on the GPU, first compiled call,
   synchronized): (a) cold, empty cache directory, then ``save_cache``;
   (b) the same directory; (c) an empty directory and ``load_cache`` of (a)'s
   file; then (d), (e), (f) the same three with Dynamo's precompiled frames
   on (``stance_magic.precompile(True)`` before ``torch.compile``), timed
   from ``torch.compile``. The goals: (c) ≤ 0.2× (a); (e) and (f) ≤ 0.05× (a).

Everything goes to ``--out``: ``gpu_check.json`` (every figure),
``gpu_check.txt`` (the summary printed at the end), ``cuda-tests.txt``
(pytest's output), ``reports.txt`` (each measured block's report).

**To carry to a machine without network** (the GPU machine has torch, Triton,
matplotlib, transformers and pytest; check with ``pip list``): wheels of
``ipython`` (with its dependencies ``traitlets``, ``jedi``, ``parso``,
``prompt_toolkit``, ``wcwidth``, ``pygments``, ``pexpect``,
``ptyprocess``, ``matplotlib-inline``, ``decorator``, ``stack_data``,
``asttokens``, ``executing``, ``pure_eval``), ``ipywidgets`` (with
``widgetsnbextension``, ``jupyterlab_widgets``, ``comm``), and
``transformers`` (with ``tokenizers``, ``safetensors``, ``huggingface_hub``,
``regex``, ``pyyaml``) if missing; install them with ``pip install
--no-index --find-links WHEELS ...``. Nothing is downloaded: the models are
built from configs with random weights. Steps 1-4 and 6 need neither IPython
nor ipywidgets; step 5 does, and is skipped with a note without them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

NO_DEVICE = "no CUDA device: nothing to check"
GOAL = 0.2
#: with Dynamo's precompiled frames, by file and by directory (issue "warm start without tracing")
PRECOMPILE_GOAL = 0.05


class Budget:
    """Seconds left of the run, for each step's timeout."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    @property
    def left(self) -> float:
        return self.end - time.monotonic()

    def cap(self, most: float, keep: float = 0.0) -> float:
        return max(min(most, self.left - keep), 0.0)


def _available(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _median_runs(fn: Callable[[], Any], n: int, sync: bool) -> float:
    import torch

    times = []
    for _ in range(n):
        if sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if sync:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _events_s(fn: Callable[[], Any]) -> float:
    """GPU seconds of one run, from CUDA events around it."""
    import torch

    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    torch.cuda.synchronize()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def _gpt2(device: str = "cuda", big: bool = False) -> tuple[Any, Any]:
    """GPT-2 from a config: 4 layers 256 wide over 16×64 tokens (the GPU
    waits for the host's launches), or ``big``: 1024 wide over 64×64 tokens
    (the GPU's work sets the pace)."""
    import models
    import torch

    model = models.gpt2(layers=4, dim=1024 if big else 256).to(device).eval()
    shape = (64, 64) if big else (16, 64)
    ids = torch.randint(0, 256, shape, generator=torch.Generator().manual_seed(0)).to(device)
    return model, ids


def _logits(model: Any, ids: Any) -> Callable[[], Any]:
    """A step: ``model``'s forward over ``ids`` without grad or KV cache."""
    import torch

    def step() -> Any:
        with torch.no_grad():
            return model(ids, use_cache=False).logits

    return step


def _keep(out: Path, name: str, rep: Any) -> str:
    """Append the report's text to ``reports.txt`` under a heading (one file:
    a device run brings back only a few)."""
    text = str(rep)
    with (out / "reports.txt").open("a") as f:
        f.write(f"==== {name}\n{text}\n\n")
    return text


# --------------------------------------------------------------------------
# 1. synchronized timings
# --------------------------------------------------------------------------


def check_sync(out: Path, repeat: int, big: bool = False) -> dict[str, Any]:
    import torch

    import stance_magic
    from stance_magic import probe
    from stance_magic.session.compare import compare
    from stance_magic.spec import MeasureSpec

    model, ids = _gpt2(big=big)
    cmodel = torch.compile(model)

    run, eager = _logits(cmodel, ids), _logits(model, ids)

    engine = stance_magic.get_engine()
    synced = compare(engine, run, MeasureSpec(), repeat=repeat, announce=False)
    # stance_magic before synchronizing: the same runs, timing the launches only
    real = probe.sync_if_cuda, probe.cuda_in_use
    probe.sync_if_cuda = probe.cuda_in_use = lambda: False
    try:
        unsynced = compare(engine, run, MeasureSpec(), repeat=repeat, announce=False)
    finally:
        probe.sync_if_cuda, probe.cuda_in_use = real
    size = "big" if big else "small"
    _keep(out, f"compare_synchronized {size}", synced.report)
    _keep(out, f"compare_unsynchronized {size}", unsynced.report)
    a, b = synced.report.compare, unsynced.report.compare
    eager_gpu = statistics.median(_events_s(eager) for _ in range(5))
    compiled_gpu = statistics.median(_events_s(run) for _ in range(5))
    return {
        "model": (
            "GPT-2 (4 layers, 1024 wide), 64×64 tokens"
            if big
            else "GPT-2 (4 layers, 256 wide), 16×64 tokens"
        )
        + ", no_grad, Inductor",
        "synchronized": {
            "eager_s": a.eager_s,
            "compiled_s": a.compiled_s,
            "speedup": a.speedup,
            "break_even_calls": a.break_even_calls,
            "flag": a.synchronized,
        },
        "unsynchronized": {
            "eager_s": b.eager_s,
            "compiled_s": b.compiled_s,
            "speedup": b.speedup,
            "break_even_calls": b.break_even_calls,
            "flag": b.synchronized,
        },
        "cuda_events": {
            "eager_s": eager_gpu,
            "compiled_s": compiled_gpu,
            "speedup": eager_gpu / compiled_gpu if compiled_gpu else None,
        },
        "manual": {
            "eager_sync_s": _median_runs(eager, 10, True),
            "eager_nosync_s": _median_runs(eager, 10, False),
            "compiled_sync_s": _median_runs(run, 10, True),
            "compiled_nosync_s": _median_runs(run, 10, False),
        },
        "report_wall_synchronized": synced.report.synchronized,
    }


# --------------------------------------------------------------------------
# 2. CUDA graphs
# --------------------------------------------------------------------------


def _cudagraph_figures(rep: Any) -> dict[str, Any]:
    cg = rep.cudagraphs
    return {
        "recorded": cg.recorded,
        "replayed": cg.replayed,
        "warmups": cg.warmups,
        "for_new_sizes": cg.for_new_sizes,
        "rerecorded": cg.rerecorded,
        "skipped": cg.skipped,
        "skips": [
            {
                "reason": s.reason,
                "count": s.count,
                "compile_id": s.compile_id,
                "frame": s.frame,
                "where": s.where,
                "source": s.source,
                "devices": s.devices,
                "logged": s.logged,
            }
            for s in cg.skips
        ],
        "frames": [
            {
                "frame": f.frame,
                "recorded": f.recorded,
                "for_new_sizes": f.for_new_sizes,
                "rerecorded": f.rerecorded,
                "why": f.why,
                "sizes": f.sizes,
            }
            for f in cg.frames
        ],
        "advice": rep.advice(),
    }


def _fixed(x: Any) -> Any:
    return (x.sin() * 2 + 1).sum(0)


def _batch(x: Any) -> Any:
    return x.sin() * 2 + 1


def _bump(x: Any) -> Any:
    x.add_(1)
    return x * 2


def _on_cpu(x: Any) -> Any:
    return x.cos() + 1


def check_cudagraphs(out: Path) -> dict[str, Any]:
    import torch
    from torch._dynamo.utils import counters

    import stance_magic

    res: dict[str, Any] = {}
    torch.compiler.reset()

    def measured(name: str, fn: Callable[[], Any]) -> dict[str, Any]:
        before = counters["inductor"]["cudagraph_skips"]
        with stance_magic.measure() as rep:
            fn()
        figures = _cudagraph_figures(rep.report)
        figures["torch_counter_skips"] = counters["inductor"]["cudagraph_skips"] - before
        figures["wall_s"] = rep.wall_s
        figures["synchronized"] = rep.synchronized
        _keep(out, f"cudagraphs_{name}", rep.report)
        return figures

    x = torch.randn(64, 64, device="cuda")
    fixed = torch.compile(_fixed, mode="reduce-overhead")
    res["fixed_first_cell"] = measured("fixed_first", lambda: [fixed(x) for _ in range(6)])
    res["fixed_second_cell"] = measured("fixed_second", lambda: [fixed(x) for _ in range(20)])

    batch = torch.compile(_batch, mode="reduce-overhead")

    def sizes() -> None:
        for n in (8, 16, 24, 32, 40, 48):
            for _ in range(3):
                batch(torch.randn(n, 64, device="cuda"))

    res["changing_batch"] = measured("changing_batch", sizes)
    bump = torch.compile(_bump, mode="reduce-overhead")
    res["mutated_input"] = measured(
        "mutated_input", lambda: [bump(torch.ones(8, device="cuda")) for _ in range(3)]
    )
    cpu = torch.compile(_on_cpu, mode="reduce-overhead")
    res["cpu_tensors"] = measured("cpu_tensors", lambda: [cpu(torch.ones(8)) for _ in range(3)])
    return res


def check_overwritten() -> dict[str, Any]:
    """torch alone (no stance_magic): what reading an output kept from an
    earlier call of a ``reduce-overhead`` function does, (a) the first call
    (a warm-up run) read after the second (the recording), as torch's docs
    show it, (b) a replay's output read after the next replay."""
    import torch

    def outcome(read: Callable[[], Any]) -> str:
        try:
            read()
        except RuntimeError as err:
            return "raised: " + str(err).splitlines()[0][:120]
        return "read without an error"

    torch.compiler.reset()
    res: dict[str, Any] = {}
    mm = torch.compile(lambda x: x @ x, mode="reduce-overhead")
    x = torch.randn(16, 16, device="cuda")
    kept = [mm(x)]  # a warm-up run
    kept.append(mm(x))  # the recording
    res["warm-up output read after the recording"] = outcome(lambda: kept[0] + 1)
    kept.clear()
    x1, x2 = torch.randn(16, 16, device="cuda"), torch.randn(16, 16, device="cuda")
    for _ in range(3):
        mm(x1)
    r1 = mm(x1)
    want = (x1 @ x1).clone()
    r2 = mm(x2)
    res["replay output read after the next replay"] = outcome(lambda: r1 + 1)
    try:
        same = bool(torch.allclose(r1, want))
        res["replay output after the next replay holds"] = (
            "its own values"
            if same
            else "the next replay's values"
            if bool(torch.allclose(r1, r2))
            else "other values"
        )
    except RuntimeError as err:
        res["replay output after the next replay holds"] = "raised: " + str(err)[:120]
    torch.compiler.reset()
    return res


# --------------------------------------------------------------------------
# 3. CUDA memory
# --------------------------------------------------------------------------


def check_memory(out: Path) -> dict[str, Any]:
    import torch

    import stance_magic

    res = {}
    model, ids = _gpt2()

    def temp() -> None:
        x = torch.empty(64 * 1024 * 1024, device="cuda")  # 256 MB
        y = x * 2
        del x, y

    def forward() -> None:
        with torch.no_grad():
            model(ids, use_cache=False)

    for name, fn in (("temporary_256MB", temp), ("gpt2_forward", forward)):
        fn()  # warm: the caching allocator and cuBLAS settle
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        indep_peak = torch.cuda.max_memory_allocated() - base
        indep_reserved = torch.cuda.max_memory_reserved()
        with stance_magic.measure(memory=True) as rep:
            fn()
        _keep(out, f"memory_{name}", rep.report)
        cuda = next((f for f in rep.memory if f.device.startswith("cuda")), None)
        if cuda is None:
            res[name] = {"error": "the report has no CUDA memory figure"}
            continue
        res[name] = {
            "report_peak_bytes": cuda.peak_bytes,
            "max_memory_allocated_peak_bytes": indep_peak,
            "ratio": cuda.peak_bytes / indep_peak if indep_peak else None,
            "report_peak_reserved_bytes": cuda.peak_reserved_bytes,
            "max_memory_reserved_bytes": indep_reserved,
            "report_reserved_bytes": cuda.reserved_bytes,
            "report_end_bytes": cuda.end_bytes,
        }
    return res


# --------------------------------------------------------------------------
# 4. compile phases
# --------------------------------------------------------------------------


def check_phases(out: Path, autotune: bool) -> dict[str, Any]:
    import torch

    import stance_magic

    res = {}
    torch.compiler.reset()
    model, ids = _gpt2()
    cmodel = torch.compile(model)
    with stance_magic.measure() as rep:
        with torch.no_grad():
            cmodel(ids, use_cache=False)
    _keep(out, "phases_gpt2", rep.report)
    res["gpt2"] = {
        "compile_s": rep.compile_s,
        "breakdown": rep.compile_breakdown,
        "kernel_breakdown": rep.kernel_breakdown,
        "first_run_breakdown": rep.first_run_breakdown,
    }
    if autotune:
        a = torch.randn(1024, 1024, device="cuda")
        mm = torch.compile(lambda p, q: (p @ q).relu(), mode="max-autotune-no-cudagraphs")
        with stance_magic.measure() as rep:
            mm(a, a)
        _keep(out, "phases_max_autotune", rep.report)
        res["max_autotune_mm"] = {
            "compile_s": rep.compile_s,
            "breakdown": rep.compile_breakdown,
            "kernel_breakdown": rep.kernel_breakdown,
            "first_run_breakdown": rep.first_run_breakdown,
        }
    return res


# --------------------------------------------------------------------------
# 4b. a compiled call's parts on the GPU
# --------------------------------------------------------------------------


def _per_call_synced(step: Callable[[], Any], n: int) -> float:
    """The median call, each waited for (host and device)."""
    return _median_runs(step, n, True)


def _per_call_events(step: Callable[[], Any], n: int) -> float:
    """The median call on the device: CUDA events recorded on the current
    stream before and after each call, none waited for until the end."""
    import torch

    pairs = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(n)
    ]
    torch.cuda.synchronize()
    for a, b in pairs:
        a.record()
        step()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) / 1e3 for a, b in pairs)


def _kernels_per_call(step: Callable[[], Any], n: int) -> float:
    """The GPU's busy time a call: the kernels torch's profiler (CUDA
    activity) saw over ``n`` calls, summed, over ``n``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            step()
        torch.cuda.synchronize()
    busy_us = sum(
        e.time_range.elapsed_us()
        for e in prof.events()
        if getattr(e.device_type, "name", "") == "CUDA"
    )
    return busy_us / 1e6 / n


def check_anatomy(out: Path, rounds: int = 3) -> dict[str, Any]:
    """The report's parts of a compiled call (host clocks) against the
    outside clock with and without waiting for the GPU, CUDA events around
    each call (device time) and torch's profiler (lookup, compiled region)."""
    import bench_anatomy as bench
    import torch

    import stance_magic

    model, ids = _gpt2()
    small = ids[:1, :8].contiguous()
    cmodel = torch.compile(model)
    tiny = torch.compile(lambda x: x + 1)
    x = torch.ones(3, device="cuda")

    gpt2_big, gpt2_small = _logits(cmodel, ids), _logits(cmodel, small)

    a = torch.randn(4096, 4096, device="cuda") / 64
    chain = torch.compile(lambda a: ((a @ a).relu() @ a) @ a)

    res: dict[str, Any] = {}
    for name, step, n in (
        ("GPT-2 16x64 (Inductor)", gpt2_big, 40),
        ("GPT-2 1x8 (Inductor)", gpt2_small, 40),
        ("x + 1 on 3 floats (Inductor)", lambda: tiny(x), 300),
        ("3 matmuls 4096x4096 (Inductor)", lambda: chain(a), 20),
    ):
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        rows: list[dict[str, Any]] = []
        for i in range(rounds):
            with stance_magic.measure("default") as rep:
                for _ in range(n):
                    step()
            p = rep.call_parts
            lookup, region = bench.profiled(step, n)
            rows.append(
                {
                    "report_call_s": p.call_s if p else None,
                    "report_wrapper_s": p.wrapper_s if p else None,
                    "report_lookup_s": p.lookup_s if p else None,
                    "report_compiled_s": p.compiled_s if p else None,
                    "report_device_s": p.device_s if p else None,
                    "report_device_calls": p.device_calls if p else None,
                    "report_gpu_bound": p.gpu_bound if p else None,
                    "profiler_kernels_per_call_s": _kernels_per_call(step, n),
                    "lookup_bounded": p.lookup_bounded if p else None,
                    "cell_wall_per_call_s": rep.wall_s / n,
                    "synchronized": rep.synchronized,
                    "host_per_call_s": bench.per_call(step, n),
                    "synced_per_call_s": _per_call_synced(step, n),
                    "device_per_call_s": _per_call_events(step, n),
                    "profiler_lookup_s": lookup,
                    "profiler_region_s": region,
                }
            )
            if i == rounds - 1:
                _keep(out, f"anatomy {name}", rep.report)
        res[name] = {
            "calls": n,
            "rounds": rows,
            "median": {
                k: statistics.median(r[k] for r in rows)
                for k in rows[0]
                if all(isinstance(r[k], float) for r in rows)
            },
        }
    return res


# --------------------------------------------------------------------------
# 5. the CUDA tests
# --------------------------------------------------------------------------


def check_tests(out: Path, timeout: float) -> dict[str, Any]:
    missing = [m for m in ("IPython", "pytest") if not _available(m)]
    if missing:
        return {"skipped": f"missing {', '.join(missing)}: carry the wheels (see the docstring)"}
    # only the files that hold CUDA tests: the others import tools (nbval,
    # playwright, the docs' Sphinx) a GPU machine may lack
    files = sorted(
        str(f.relative_to(REPO))
        for f in (REPO / "tests").glob("test_*.py")
        if "@cuda_test" in f.read_text()
    )
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "cuda"]
    cmd += files
    t0 = time.perf_counter()
    # an Inductor cache of the tests' own, as on CI: graphs of the steps
    # above would be loaded with those steps' stacks (the test that needs
    # another process's cache makes one)
    cache = tempfile.mkdtemp(prefix="gpu-check-tests-inductor-")
    try:
        proc = subprocess.run(
            cmd,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**_env(), "TORCHINDUCTOR_CACHE_DIR": cache},
        )
    except subprocess.TimeoutExpired as err:
        text = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else err.stdout or ""
        (out / "cuda-tests.txt").write_text(text)
        return {"returncode": None, "summary": f"timed out after {timeout:.0f} s"}
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    (out / "cuda-tests.txt").write_text(proc.stdout + proc.stderr)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    return {
        "command": " ".join(cmd),
        "returncode": proc.returncode,
        "summary": lines[-1] if lines else "",
        "seconds": time.perf_counter() - t0,
    }


def _env() -> dict[str, str]:
    return {
        **os.environ,
        # the repository first, then whatever was set (carried wheels)
        "PYTHONPATH": os.pathsep.join(
            [str(REPO), str(REPO / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        "MPLBACKEND": "Agg",
    }


# --------------------------------------------------------------------------
# 6. warm starts in fresh processes
# --------------------------------------------------------------------------


def warm_worker(load: str | None, save: str | None, precompile: bool = False) -> None:
    """One fresh process: the first compiled GPT-2 call on the GPU, timed
    (synchronized) from ``torch.compile`` (which, with precompiled frames on,
    installs the saved frame) through the cache load to the first result;
    one JSON line."""
    import torch

    import stance_magic

    if precompile:
        stance_magic.precompile(True)
    model, ids = _gpt2()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if load:
        stance_magic.load_cache(load)
    with stance_magic.measure() as rep:
        tc = time.perf_counter()
        cmodel = torch.compile(model)
        tc = time.perf_counter() - tc
        with torch.no_grad():
            cmodel(ids, use_cache=False)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    if save:
        stance_magic.save_cache(save)
    cc = rep.compile_caches
    print(
        "GPU-WARM "
        + json.dumps(
            {
                "first_s": first_s,
                "torch_compile_s": tc,
                "compile_s": rep.compile_s,
                "dynamo_s": rep.compile_breakdown.get("dynamo", 0.0),
                "kernel_breakdown": rep.kernel_breakdown,
                "state": cc.state,
                "fx": f"{cc.fx_hits}/{cc.fx_misses}",
                "aot": f"{cc.aot_hits}/{cc.aot_misses}",
                "precompiled": [p.outcome for p in rep.precompiled],
                "calls": [rep.calls.cached, rep.calls.compiled, sum(rep.calls.eager.values())],
                "synchronized": rep.synchronized,
            }
        )
    )


def check_warm(budget: Budget) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="gpu-warm-"))
    saved, pc_saved = work / "gpt2.smcache", work / "gpt2-pc.smcache"
    res: dict[str, Any] = {}
    try:
        dirs = {name: work / name for name in ("cold", "load", "pc-cold", "pc-load")}
        for d in dirs.values():
            d.mkdir()
        for key, cache_dir, load, save, precompile in (
            ("cold", dirs["cold"], None, saved, False),
            ("disk", dirs["cold"], None, None, False),
            ("load", dirs["load"], saved, None, False),
            # Dynamo's precompiled frames on (stance_magic.precompile), ratios to (a)
            ("pc-cold", dirs["pc-cold"], None, pc_saved, True),
            ("pc-disk", dirs["pc-cold"], None, None, True),
            ("pc-load", dirs["pc-load"], pc_saved, None, True),
        ):
            timeout = budget.cap(240, keep=5)
            if timeout < 30:
                res[key] = {"skipped": "out of time"}
                continue
            cmd = [sys.executable, __file__, "--warm-worker"]
            if load:
                cmd += ["--load", str(load)]
            if save:
                cmd += ["--save", str(save)]
            if precompile:
                cmd += ["--precompile"]
            env = {**_env(), "TORCHINDUCTOR_CACHE_DIR": str(cache_dir)}
            t0 = time.perf_counter()
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
            except subprocess.TimeoutExpired:
                res[key] = {"error": f"timed out after {timeout:.0f} s"}
                continue
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("GPU-WARM ")), "")
            if not line:
                res[key] = {"error": (proc.stdout + proc.stderr)[-2000:]}
                continue
            res[key] = json.loads(line[len("GPU-WARM ") :])
            res[key]["process_s"] = time.perf_counter() - t0
        cold = res.get("cold", {}).get("first_s")
        for key in ("disk", "load", "pc-cold", "pc-disk", "pc-load"):
            first = res.get(key, {}).get("first_s")
            if cold and first:
                res[key]["ratio_to_cold"] = first / cold
        goals = []
        ratio = res.get("load", {}).get("ratio_to_cold")
        if ratio is not None:
            goals.append(f"(c) ≤ {GOAL}× (a): {ratio:.2f}×: {'MET' if ratio <= GOAL else 'MISSED'}")
        for key in ("pc-disk", "pc-load"):
            ratio = res.get(key, {}).get("ratio_to_cold")
            if ratio is not None:
                met = "MET" if ratio <= PRECOMPILE_GOAL else "MISSED"
                goals.append(f"{key} ≤ {PRECOMPILE_GOAL}× (a): {ratio:.3f}×: {met}")
        if goals:
            res["goal"] = "; ".join(goals)
        res["cache_file_bytes"] = saved.stat().st_size if saved.exists() else None
        res["precompile_file_bytes"] = pc_saved.stat().st_size if pc_saved.exists() else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


# --------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------


def _step(results: dict[str, Any], name: str, fn: Callable[[], Any]) -> None:
    t0 = time.perf_counter()
    print(f"gpu_check: {name} ...", flush=True)
    try:
        results[name] = fn()
    except Exception as exc:
        results[name] = {
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
    if isinstance(results[name], dict):
        results[name].setdefault("seconds", time.perf_counter() - t0)


def summary(res: dict[str, Any]) -> str:
    """The figures the issue asks for, one line each."""
    lines = [f"gpu_check on {res['env']['device']}; torch {res['env']['torch']}"]

    def get(*path: str) -> Any:
        d: Any = res
        for p in path:
            if not isinstance(d, dict) or p not in d:
                return None
            d = d[p]
        return d

    for step in (
        "sync",
        "sync_big",
        "overwritten",
        "cudagraphs",
        "memory",
        "phases",
        "anatomy",
        "tests",
        "warm",
    ):
        err = get(step, "error") or get(step, "skipped")
        if err:
            lines.append(f"{step}: {str(err).splitlines()[0]}")
    for key in ("sync", "sync_big"):
        s = get(key, "synchronized", "speedup")
        u = get(key, "unsynchronized", "speedup")
        e = get(key, "cuda_events", "speedup")
        if s is not None:
            lines.append(
                f"speedup on {get(key, 'model')}: {s:.2f}× synchronized, {u or 0:.2f}× "
                f"unsynchronized (CUDA events: {e or 0:.2f}×)"
            )
    ow = get("overwritten")
    if isinstance(ow, dict) and "error" not in ow:
        lines.append(f"outputs kept across calls (torch alone): {json.dumps(ow)}")
    for name in ("fixed_first_cell", "changing_batch", "mutated_input", "cpu_tensors"):
        cg = get("cudagraphs", name)
        if cg and "recorded" in cg:
            reasons = "; ".join(s["reason"] for s in cg["skips"]) or "-"
            lines.append(
                f"CUDA graphs, {name}: {cg['recorded']} recorded ({cg['for_new_sizes']} for new "
                f"sizes, {cg['rerecorded']} re-recorded), {cg['replayed']} replayed, "
                f"{cg['skipped']} skipped (torch's counter: {cg['torch_counter_skips']}): {reasons}"
            )
    for name in ("temporary_256MB", "gpt2_forward"):
        m = get("memory", name)
        if m and "report_peak_bytes" in m:
            lines.append(
                f"CUDA peak, {name}: report {m['report_peak_bytes']} B vs "
                f"max_memory_allocated {m['max_memory_allocated_peak_bytes']} B "
                f"(ratio {m['ratio']:.3f}); reserved peak {m['report_peak_reserved_bytes']} B"
            )
    for name, a in (get("anatomy") or {}).items():
        m = a.get("median") if isinstance(a, dict) else None
        if m:
            us = {k: v * 1e6 for k, v in m.items()}

            def f(key: str, us: dict[str, float] = us) -> str:
                return f"{us[key]:.1f}" if key in us else "-"

            lines.append(
                f"a call of {name}, µs: report call {f('report_call_s')} (wrapper "
                f"{f('report_wrapper_s')}, lookup {f('report_lookup_s')}, compiled "
                f"{f('report_compiled_s')}); outside clock {f('host_per_call_s')} "
                f"unsynchronized, {f('synced_per_call_s')} synchronized; CUDA events "
                f"{f('device_per_call_s')}; profiler lookup {f('profiler_lookup_s')}, "
                f"region {f('profiler_region_s')}; on the GPU: report {f('report_device_s')}, "
                f"profiler's kernels {f('profiler_kernels_per_call_s')}"
            )
    k = get("phases", "gpt2", "kernel_breakdown")
    if k is not None:
        lines.append(f"compile parts, GPT-2: {k}")
    t = get("tests", "summary")
    if t:
        lines.append(f"CUDA tests: {t}")
    for key in ("cold", "disk", "load", "pc-cold", "pc-disk", "pc-load"):
        w = get("warm", key)
        if w and "first_s" in w:
            ratio = w.get("ratio_to_cold")
            lines.append(
                f"warm start {key}: first compiled result {w['first_s']:.3f} s"
                + (f" ({ratio:.3f}× cold)" if ratio else "")
                + f"; FX {w['fx']}, AOT {w['aot']}, {w['state']}, dynamo {w['dynamo_s']:.3f} s"
                + f", precompiled {','.join(w.get('precompiled') or []) or '-'}"
                + f", calls cached/compiled/eager {w.get('calls')}"
            )
        elif w:
            lines.append(f"warm start {key}: {str(w.get('error') or w.get('skipped'))[-300:]}")
    goal = get("warm", "goal")
    if goal:
        lines.append(f"warm-start goal {goal}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None, help="the folder for the figures")
    p.add_argument("--budget", type=float, default=450.0, help="seconds for the whole run")
    p.add_argument("--quick", action="store_true", help="steps 1-4 only, fewer runs")
    p.add_argument("--no-autotune", action="store_true", help="skip the max-autotune compile")
    p.add_argument("--warm-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--load", default=None, help=argparse.SUPPRESS)
    p.add_argument("--save", default=None, help=argparse.SUPPRESS)
    p.add_argument("--precompile", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.warm_worker:
        warm_worker(args.load, args.save, args.precompile)
        return 0
    out = args.out or Path(os.environ.get("OUT") or "gpu_check_out")
    out.mkdir(parents=True, exist_ok=True)
    import torch

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA",
        "cpus": os.cpu_count(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    results: dict[str, Any] = {"env": env, "cuda": torch.cuda.is_available(), "checked": []}
    if not torch.cuda.is_available():
        (out / "gpu_check.json").write_text(json.dumps(results, indent=1))
        print(NO_DEVICE)
        return 0
    budget = Budget(args.budget)
    repeat = 5 if args.quick else 8
    # the in-process steps compile cold, in an Inductor cache directory of their own
    cache = Path(tempfile.mkdtemp(prefix="gpu-check-inductor-"))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    _step(results, "phases", lambda: check_phases(out, not (args.quick or args.no_autotune)))
    _step(results, "sync", lambda: check_sync(out, repeat))
    _step(results, "sync_big", lambda: check_sync(out, repeat, big=True))
    _step(results, "overwritten", check_overwritten)
    _step(results, "cudagraphs", lambda: check_cudagraphs(out))
    _step(results, "memory", lambda: check_memory(out))
    _step(results, "anatomy", lambda: check_anatomy(out, 2 if args.quick else 3))
    if not args.quick:
        _step(results, "warm", lambda: check_warm(budget))
        _step(results, "tests", lambda: check_tests(out, budget.cap(240, keep=5)))
    shutil.rmtree(cache, ignore_errors=True)
    results["checked"] = [k for k in results if k not in ("env", "cuda", "checked")]
    (out / "gpu_check.json").write_text(json.dumps(results, indent=1, default=str))
    text = summary(results)
    (out / "gpu_check.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
