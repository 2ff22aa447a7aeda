"""What the GPU's additions cost a measured block on a machine without CUDA.

Run from the repository root::

    .venv/bin/python benchmarks/bench_sync.py            # about 20 s on 2 cores
    .venv/bin/python benchmarks/bench_sync.py --quick    # a smoke run
    .venv/bin/python benchmarks/bench_sync.py --json out.json

Three figures, each a median over rounds (``timeit``, best of each round):

* ``probe.sync_if_cuda()`` per call, in a process that has imported torch and
  not initialized CUDA (what a CPU machine pays: a dictionary lookup and
  ``torch.cuda.is_initialized()``), beside an empty Python function call;
* the CUDA-graph watch's window (``start`` + ``stop``, wrapping torch's
  CUDA-graph functions and putting them back) with Inductor imported;
* an empty ``stance_magic.measure()`` block as it is, and with the two
  synchronization checks and the CUDA-graph watch replaced by no-ops,
  interleaved round by round: the difference is what a measured cell pays
  for them.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import timeit
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def per_call(fn: Callable[[], Any], number: int, rounds: int) -> list[float]:
    return [min(timeit.repeat(fn, number=number, repeat=3)) / number for _ in range(rounds)]


def bench(quick: bool) -> dict[str, Any]:
    import torch
    import torch._inductor.output_code

    import stance_magic
    from stance_magic import probe
    from stance_magic.probe import cudagraphs

    assert not torch.cuda.is_initialized(), "this measures the machine without CUDA in use"
    n = 20_000 if quick else 200_000
    rounds = 3 if quick else 7
    res: dict[str, Any] = {}

    def nothing() -> None:
        return None

    res["sync_if_cuda_s"] = per_call(probe.sync_if_cuda, n, rounds)
    res["empty_call_s"] = per_call(nothing, n, rounds)

    watch = cudagraphs.watch()

    def window() -> None:
        watch.stop(watch.start())

    res["cudagraph_window_s"] = per_call(window, n // 20, rounds)

    f = torch.compile(lambda x: x + 1, backend="eager")
    x = torch.ones(2)
    f(x)

    engine = stance_magic.get_engine()

    def block() -> None:
        with stance_magic.measure():
            pass
        if len(engine.history) > 1000:
            engine.clear_history()

    real = probe.sync_if_cuda, cudagraphs.watch

    class Idle:
        def start(self) -> None:
            return None

        def stop(self, mark: Any) -> Any:
            return None

    idle = Idle()
    with_s, without_s = [], []
    m = n // 100
    for _ in range(rounds):
        with_s.append(min(timeit.repeat(block, number=m, repeat=3)) / m)
        probe.sync_if_cuda = lambda: False
        cudagraphs.watch = lambda: idle  # type: ignore[assignment,return-value]
        try:
            without_s.append(min(timeit.repeat(block, number=m, repeat=3)) / m)
        finally:
            probe.sync_if_cuda, cudagraphs.watch = real
    res["measure_block_s"] = with_s
    res["measure_block_without_s"] = without_s
    res["added_per_block_s"] = [a - b for a, b in zip(with_s, without_s)]
    return res


def fmt(s: float) -> str:
    return f"{s * 1e9:.0f} ns" if s < 1e-6 else f"{s * 1e6:.2f} µs"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    import torch

    res = bench(args.quick)
    med = {k: statistics.median(v) for k, v in res.items()}
    print(
        f"Python {platform.python_version()}, torch {torch.__version__}, no CUDA in use; "
        f"medians of {len(res['sync_if_cuda_s'])} rounds"
    )
    print(f"  probe.sync_if_cuda()                       {fmt(med['sync_if_cuda_s']):>10} a call")
    print(f"  an empty Python function (reference)       {fmt(med['empty_call_s']):>10} a call")
    print(
        f"  CUDA-graph watch start + stop              {fmt(med['cudagraph_window_s']):>10} a block"
    )
    print(f"  empty measure() block                      {fmt(med['measure_block_s']):>10}")
    print(f"  ... without the two checks and the watch   {fmt(med['measure_block_without_s']):>10}")
    print(f"  added per measured block                   {fmt(med['added_per_block_s']):>10}")
    if args.json:
        args.json.write_text(json.dumps({"runs": res, "median": med}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
