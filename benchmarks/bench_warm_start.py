"""Warm starts: time to the first compiled result in a fresh Jupyter kernel.

Run from the repository root::

    .venv/bin/python benchmarks/bench_warm_start.py            # three models, 3 rounds
    .venv/bin/python benchmarks/bench_warm_start.py --quick    # a smoke run: tour model, 1 round
    .venv/bin/python benchmarks/bench_warm_start.py --json out.json --rounds 5

Every measurement is a new ipykernel (this interpreter, this checkout on its
``PYTHONPATH``), started through ``jupyter_client`` as JupyterLab starts one,
and shut down after it. Each round runs, per model, six kernels:

(a) **cold**: an empty ``TORCHINDUCTOR_CACHE_DIR`` of its own; the kernel then
    saves its compile caches with ``%stance cache save``;
(b) **on-disk caches warm**: the same cache directory as (a), as after a
    kernel restart;
(c) **fresh directory + load**: another empty cache directory, and
    ``%stance cache load`` of the file (a) saved, as on another machine or
    after the cache directory was cleaned;
(d), (e), (f): the same three with Dynamo's precompiled frames on
    (``%stance cache precompile on`` before ``torch.compile``), ratios still
    to (a).

In each kernel a first cell imports torch and stance_magic and builds the
model and its input (not timed); the timed cell is ``torch.compile(model)``
and the first compiled call (with, for (c) and (f), the ``%stance cache
load`` before it), measured by ``perf_counter`` inside the kernel, with the
cell's report read back: its compile time, the Dynamo tracing in it (paid in
every case but a precompiled frame used), the compile caches' hits and
misses and what became of the precompiled frame; the ``torch.compile()``
line's own time (where a precompiled frame is installed, with Inductor's
import) and the first call's alone (a cold one compiles in it; its ratio to
(a)'s first call is the measure the issue's 0.003 s against 9.8 s used);
and, from the cache directory, how many C++ binaries (shared objects:
kernels and Inductor's CPU-feature checks) the kernel built, less those the
loaded file brought. Ratios are to (a), per round (paired), then the
median over rounds. The models compile with Inductor (torch.compile's
default backend): the tour's block (LayerNorm + MLP, 1024×128,
``notebooks/01_tour.ipynb``) under ``no_grad``, the same block's training
step (forward and backward), and GPT-2 from a small ``GPT2Config``
(``tests/models.py``, random weights) on an 8-token prompt under
``no_grad``.

The goals, (c) ≤ 0.2× (a) on the tour model and (e), (f) ≤ 0.05× (a) on
each model, are printed as met or missed; the exit status is 0 either way.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jsonenv

REPO = Path(__file__).resolve().parent.parent
GOAL = 0.2

#: the tour's block (notebooks/01_tour.ipynb), built with its input
TOUR_BLOCK = """\
import math, torch
class Block(torch.nn.Module):
    def __init__(self, d=128, hidden=512):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, hidden)
        self.down = torch.nn.Linear(hidden, d)

    def forward(self, x):
        h = self.up(self.norm(x))
        h = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
        return x + self.down(h)

torch.manual_seed(0)
model = Block()
x = torch.randn(1024, 128)
"""

MODELS = {
    "tour": (
        "the tour's block (LayerNorm + MLP, 1024×128)",
        TOUR_BLOCK
        + """\
def first():
    with torch.no_grad():
        return cmodel(x)
""",
    ),
    "tour-train": (
        "the tour's block, one training step (forward and backward)",
        TOUR_BLOCK
        + """\
def first():
    loss = cmodel(x).square().mean()
    loss.backward()
    return loss
""",
    ),
    "gpt2": (
        "GPT-2 from a small GPT2Config (2 layers, 64 wide), 8-token prompt",
        """\
import torch, models
model = models.gpt2()
ids = torch.randint(0, 256, (1, 8), generator=torch.Generator().manual_seed(0))
def first():
    with torch.no_grad():
        return cmodel(ids, use_cache=False).logits
""",
    ),
}

SETUP = """\
%load_ext stance_magic
import json, time, stance_magic
{precompile}
{model}
"""

TIMED = """\
_t0 = time.perf_counter()
{load}
with stance_magic.measure() as _rep:
    _tc = time.perf_counter()
    cmodel = torch.compile(model)
    _tc = time.perf_counter() - _tc
    _tf = time.perf_counter()
    _y = first()
    _tf = time.perf_counter() - _tf
_t = time.perf_counter() - _t0
print("WARM-START-RESULT " + json.dumps({{
    "first_s": _t,
    "torch_compile_s": _tc,
    "first_call_s": _tf,
    "compile_s": _rep.compile_s,
    "dynamo_s": _rep.compile_breakdown.get("dynamo", 0.0),
    "fx_hits": _rep.compile_caches.fx_hits, "fx_misses": _rep.compile_caches.fx_misses,
    "aot_hits": _rep.compile_caches.aot_hits, "aot_misses": _rep.compile_caches.aot_misses,
    "state": _rep.compile_caches.state, "loaded_s": _rep.compile_caches.loaded_s,
    "generated_s": _rep.compile_caches.generated_s,
    "precompiled": [p.outcome for p in _rep.precompiled],
    "calls": [_rep.calls.cached, _rep.calls.compiled, sum(_rep.calls.eager.values())],
}}))
"""

SCENARIOS = (
    ("cold", "(a) cold: empty cache directory"),
    ("disk", "(b) on-disk caches warm (same directory, new kernel)"),
    ("load", "(c) fresh directory + %stance cache load"),
    ("pc-cold", "(d) precompile on, cold (ratios to (a))"),
    ("pc-disk", "(e) precompile on, same directory as (d)"),
    ("pc-load", "(f) precompile on, fresh directory + load of (d)'s file"),
)
#: the goal with Dynamo's precompiled frames (issue "warm start without tracing")
PRECOMPILE_GOAL = 0.05


class Kernel:
    """A real ipykernel, driven as a front end drives it; stdout collected."""

    def __init__(self, env: dict[str, str]) -> None:
        from jupyter_client.manager import KernelManager

        self.km = KernelManager(kernel_name="python3", transport="ipc")
        self.km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        self.km.start_kernel(env=env, stderr=subprocess.DEVNULL)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)

    def run(self, code: str, timeout: float) -> str:
        """Run one cell; its stdout. Raises on an error or after ``timeout`` s."""
        msg_id = self.kc.execute(code, store_history=True)
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"cell still running after {timeout:.0f} s")
            msg = self.kc.get_iopub_msg(timeout=left)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "stream" and msg["content"]["name"] == "stdout":
                out.append(msg["content"]["text"])
            elif kind == "error":
                raise RuntimeError("\n".join(msg["content"]["traceback"])[-2000:])
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def one_kernel(
    model: str, cache_dir: Path, load: Path | None, save: Path | None, precompile: bool = False
) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")]),
        "MPLBACKEND": "Agg",
        "TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
    }
    so_before = _compiled_kernels(cache_dir)
    t0 = time.perf_counter()
    k = Kernel(env)
    try:
        pc = "%stance cache precompile on -q" if precompile else ""
        k.run(SETUP.format(model=MODELS[model][1], precompile=pc), timeout=300)
        ready_s = time.perf_counter() - t0
        line = f'get_ipython().run_line_magic("stance", "cache load {load} -q")' if load else ""
        text = k.run(TIMED.format(load=line), timeout=600)
        result = json.loads(text.split("WARM-START-RESULT ", 1)[1].splitlines()[0])
        result["kernel_ready_s"] = ready_s
        if save is not None:
            k.run(f"%stance cache save {save} -q", timeout=120)
            result["saved_bytes"] = save.stat().st_size
    finally:
        k.close()
    # C++ binaries this kernel compiled: shared objects new in the directory
    # that the loaded file did not bring (torch's mega-cache carries the
    # generated code, not the compiled C++; the file carries both)
    brought = _carried(load) if load else set()
    result["kernels_compiled"] = len(_compiled_kernels(cache_dir) - so_before - brought)
    return result


def _compiled_kernels(cache_dir: Path) -> set[str]:
    return {p.name for p in cache_dir.rglob("*.so")}


def _carried(path: Path) -> set[str]:
    """The names of the compiled binaries a cache file carries (its header)."""
    with open(path, "rb") as f:
        f.readline()
        header = json.loads(f.readline())
    return {Path(rel).name for rel, _ in header.get("kernels") or []}


def bench(models: list[str], rounds: int, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for model in models:
        runs: dict[str, list[dict]] = {key: [] for key, _ in SCENARIOS}
        for r in range(rounds):
            for pc in (False, True):
                tag = "pc-" if pc else ""
                cold_dir = work / f"{model}-{r}-{tag}cold"
                load_dir = work / f"{model}-{r}-{tag}load"
                saved = work / f"{model}-{r}-{tag}.smcache"
                for d in (cold_dir, load_dir):
                    shutil.rmtree(d, ignore_errors=True)
                    d.mkdir(parents=True)
                runs[f"{tag}cold"].append(one_kernel(model, cold_dir, None, saved, pc))
                runs[f"{tag}disk"].append(one_kernel(model, cold_dir, None, None, pc))
                runs[f"{tag}load"].append(one_kernel(model, load_dir, saved, None, pc))
            print(
                f"  {model} round {r + 1}/{rounds}: "
                + ", ".join(f"{k} {runs[k][-1]['first_s']:.2f} s" for k, _ in SCENARIOS),
                flush=True,
            )
        out[model] = summarize(runs)
    return out


def _stat(xs: list[float]) -> dict[str, float]:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0], xs[0], xs[0]]
    return {"median": statistics.median(xs), "q1": q[0], "q3": q[2], "n": len(xs)}


def summarize(runs: dict[str, list[dict]]) -> dict[str, Any]:
    res: dict[str, Any] = {"runs": runs}
    cold = [r["first_s"] for r in runs["cold"]]
    for key, _ in SCENARIOS:
        rs = runs[key]
        res[key] = {
            "first_s": _stat([r["first_s"] for r in rs]),
            "dynamo_s": _stat([r["dynamo_s"] for r in rs]),
            "compile_s": _stat([r["compile_s"] for r in rs]),
            "torch_compile_s": _stat([r.get("torch_compile_s", 0.0) for r in rs]),
            "ratio": _stat([r["first_s"] / c for r, c in zip(rs, cold)]),
            # the first compiled call alone, after torch.compile (the issue's own
            # measure: a Dynamo cache hit's call 0.003 s against a cold one's 9.8 s)
            "first_call_s": _stat([r["first_call_s"] for r in rs]),
            "call_ratio": _stat(
                [r["first_call_s"] / c["first_call_s"] for r, c in zip(rs, runs["cold"])]
            ),
            "dynamo_share_of_cold": _stat([r["dynamo_s"] / c for r, c in zip(rs, cold)]),
            "fx": f"{rs[-1]['fx_hits']}/{rs[-1]['fx_misses']}",
            "aot": f"{rs[-1]['aot_hits']}/{rs[-1]['aot_misses']}",
            "state": rs[-1]["state"],
            "kernel_ready_s": _stat([r["kernel_ready_s"] for r in rs]),
            "kernels_compiled": rs[-1]["kernels_compiled"],
            "precompiled": rs[-1].get("precompiled", []),
            "calls": rs[-1].get("calls"),
        }
    res["saved_bytes"] = runs["cold"][-1].get("saved_bytes")
    return res


def fmt_t(s: float) -> str:
    return f"{s:.2f} s" if s >= 1 else f"{s * 1e3:.0f} ms"


def format_results(res: dict[str, Any]) -> str:
    lines = [
        f"warm starts, {res['rounds']} round(s); Python {res['env']['python']}, torch "
        f"{res['env']['torch']}, {res['env']['cpus']} CPUs",
        f"command: {res['command']}",
    ]
    for model, r in res["models"].items():
        lines.append("")
        lines.append(f"{model}: {MODELS[model][0]}; cache file {r['saved_bytes'] or 0} bytes")
        head = (
            f"  {'scenario':<55} {'first result':>13} {'ratio to (a)':>13} "
            f"{'Dynamo tracing':>15} {'compile':>9} {'FX hit/miss':>11} {'AOT hit/miss':>12} "
            f"{'C++ binaries built':>18} {'precompiled':>12} {'torch.compile()':>15} "
            f"{'first call':>10} {'call ratio':>10}"
        )
        lines.append(head)
        for key, label in SCENARIOS:
            s = r[key]
            lines.append(
                f"  {label:<55} {fmt_t(s['first_s']['median']):>13} "
                f"{s['ratio']['median']:>12.2f}× {fmt_t(s['dynamo_s']['median']):>15} "
                f"{fmt_t(s['compile_s']['median']):>9} {s['fx']:>11} {s['aot']:>12} "
                f"{s['kernels_compiled']:>18} {','.join(s['precompiled']) or '-':>12} "
                f"{fmt_t(s['torch_compile_s']['median']):>15} "
                f"{fmt_t(s['first_call_s']['median']):>10} {s['call_ratio']['median']:>9.4f}×"
            )
    if "tour" in res["models"]:
        ratio = res["models"]["tour"]["load"]["ratio"]["median"]
        verdict = "MET" if ratio <= GOAL else "MISSED"
        lines.append("")
        lines.append(f"goal (c) ≤ {GOAL}× (a) on the tour model: {ratio:.3f}×: {verdict}")
    for model, r in res["models"].items():
        for key in ("pc-disk", "pc-load"):
            ratio = r[key]["ratio"]["median"]
            verdict = "MET" if ratio <= PRECOMPILE_GOAL else "MISSED"
            call = r[key]["call_ratio"]["median"]
            met = "MET" if call <= PRECOMPILE_GOAL else "MISSED"
            lines.append(
                f"goal {key} ≤ {PRECOMPILE_GOAL}× (a) on {model}: from torch.compile "
                f"{ratio:.3f}×: {verdict}; the first call alone {call:.4f}×: {met}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smoke run: tour model, 1 round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", default="tour,tour-train,gpt2")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args(argv)
    models = ["tour"] if args.quick else [m for m in args.models.split(",") if m]
    rounds = 1 if args.quick else args.rounds
    for m in models:
        if m not in MODELS:
            p.error(f"unknown model {m!r} (choose from {', '.join(MODELS)})")

    work = Path(tempfile.mkdtemp(prefix="bench-warm-start-"))
    try:
        t0 = time.perf_counter()
        figures = bench(models, rounds, work)
        res = {
            "command": jsonenv.command("bench_warm_start.py", argv),
            "rounds": rounds,
            "seconds": time.perf_counter() - t0,
            "env": jsonenv.environment(),
            "models": figures,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(format_results(res))
    print(f"(ran in {res['seconds']:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
