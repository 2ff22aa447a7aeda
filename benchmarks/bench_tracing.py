"""What timing Dynamo's tracing by function costs a cold compile: GPT-2 and
BERT from small configs, compiled in fresh processes with torch's
``dynamo_profiler`` on (stance_magic's default on torch 2.13+) and off
(``trace_functions=False``), interleaved.

Run from the repository root::

    .venv/bin/python benchmarks/bench_tracing.py                   # about 3 min on 2 cores
    .venv/bin/python benchmarks/bench_tracing.py --processes 9 --backends aot_eager inductor

Each process builds one model (``transformers``' ``GPT2Model`` and
``BertModel``, 4 layers, random weights), compiles it with one backend and
makes its first call inside ``stance_magic.measure(trace_functions=...)``.
Its figures come from torch's own records (``CompilationMetrics``): the
compile time (``entire_frame_compile_time_s``) and Dynamo's part of it
(the report's ``dynamo`` phase), with the call's wall time from outside
(``time.perf_counter``). Processes alternate off, on, off, on ... so a drift
of the machine falls on both; printed: the median of each, and the ratio
on/off of the medians, against the limit (3 %). Inductor compiles in a
fresh cache directory per process (a cold compile, no FX graph cache hit).
The exit status is 0 whatever the figures (timings depend on the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

LIMIT = 1.03


def child(model: str, backend: str, on: bool) -> None:
    import torch

    torch.set_num_threads(1)
    import transformers

    transformers.logging.set_verbosity_error()
    if model == "gpt2":
        from transformers import GPT2Config, GPT2Model

        cfg = GPT2Config(n_layer=4, n_embd=128, n_head=4, vocab_size=1000, n_positions=128)
        m = GPT2Model(cfg).eval()
    else:
        from transformers import BertConfig, BertModel

        cfg = BertConfig(
            num_hidden_layers=4,
            hidden_size=128,
            num_attention_heads=4,
            intermediate_size=256,
            vocab_size=1000,
        )
        m = BertModel(cfg).eval()
    x = torch.randint(0, 1000, (2, 32))
    from torch._dynamo.utils import get_compilation_metrics

    import stance_magic

    f = torch.compile(m, backend=backend)
    with torch.no_grad():
        t0 = time.perf_counter()
        with stance_magic.measure(trace_functions=on) as meas:
            f(x)
        wall = time.perf_counter() - t0
    recs = get_compilation_metrics()
    rep = meas.report
    print(
        json.dumps(
            {
                "wall_s": wall,
                "compile_s": sum(r.entire_frame_compile_time_s or 0 for r in recs),
                "dynamo_s": rep.compile_breakdown.get("dynamo", 0.0),
                "state": rep.tracing.state,
                "functions": len(rep.tracing.functions),
            }
        )
    )


def run(model: str, backend: str, on: bool) -> dict[str, float]:
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = cache
        out = subprocess.run(
            [sys.executable, __file__, "--child", model, backend, "on" if on else "off"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=7, help="fresh processes per setting")
    ap.add_argument("--models", nargs="+", default=["gpt2", "bert"])
    ap.add_argument("--backends", nargs="+", default=["aot_eager"])
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        model, backend, on = args.child
        child(model, backend, on == "on")
        return
    import torch

    print(f"torch {torch.__version__}, {args.processes} fresh processes per setting, interleaved")
    print(f"{'model':6} {'backend':10} {'figure':9} {'off':>9} {'on':>9} {'on/off':>7}  limit")
    for model in args.models:
        for backend in args.backends:
            got: dict[bool, list[dict[str, float]]] = {False: [], True: []}
            for _ in range(args.processes):
                for on in (False, True):
                    got[on].append(run(model, backend, on))
            assert all(r["state"] == "measured" and r["functions"] for r in got[True])
            assert all(r["state"] == "off" for r in got[False])
            for key in ("compile_s", "dynamo_s", "wall_s"):
                off = statistics.median(r[key] for r in got[False])
                on_ = statistics.median(r[key] for r in got[True])
                ratio = on_ / off
                verdict = "" if key != "compile_s" else ("met" if ratio <= LIMIT else "over")
                print(
                    f"{model:6} {backend:10} {key:9} {off:8.3f}s {on_:8.3f}s {ratio:6.3f}x  "
                    f"{verdict}"
                )


if __name__ == "__main__":
    main()
