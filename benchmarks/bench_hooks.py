"""What any Python hook on torch.compile's call path costs: the floor under
the measured tiny-call loop of ``bench_overhead.py`` (issue 37's ≤ 1.12×;
issue 17 aimed at ≤ 1.05×).

Run from the repository root::

    .venv/bin/python benchmarks/bench_hooks.py            # about 10 s on 2 cores
    .venv/bin/python benchmarks/bench_hooks.py --quick    # a smoke run
    .venv/bin/python benchmarks/bench_hooks.py --json out.json

A tiny compiled function (``x * 2 + 1`` on ``torch.ones(8)``,
``backend="eager"``, about 13 µs a call here) called in a loop, in one
process, with the two places torch lets Python in on every compiled call
taken five ways, interleaved round by round (the order rotates):

* **bare**: nothing installed;
* **pass-through**: torch's ``_callback_from_stance`` (torch calls it four
  times a compiled call, three of them with None) wrapped by a closure that
  only calls it, and a guard-complete hook that only returns its argument;
* **counting**: the least a per-function count can do in Python: the
  wrapper finds the function's counter in a dict, the hook adds the hit;
  no check that the lookup is the function's own, that the call is on the
  measured thread or under which stance it ran;
* **counting + checks**: the same with those three checks, as the
  recorder's counted-only calls make them (the compile_wrapper frame and its
  identity at the lookup, ``threading.get_ident``, torch's stance);
* **stance_magic**: the recorder with a window open, past each function's
  first 64 timed lookups (counted-only calls, 1 in 16 timed).

Figures are medians over the rounds of the per-call time; "added" and the
ratios are paired per round against bare. The counts each variant made are
printed beside it (every variant but pass-through counts every hit). The
exit status is always 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import jsonenv

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

#: issue 37's target for a measured loop of a tiny compiled function
TARGET = 1.12
#: issue 17's older aspiration for it, below what exact counting in Python can do
OLD_TARGET = 1.05


def _setup() -> tuple[Any, Any, Callable[[int], float]]:
    import torch

    def tiny(x):
        return x * 2 + 1

    f = torch.compile(tiny, backend="eager")
    x = torch.ones(8)
    for _ in range(20):
        f(x)

    def loop(n: int) -> float:
        t = time.perf_counter()
        for _ in range(n):
            f(x)
        return (time.perf_counter() - t) / n

    return f, x, loop


def _variants(f: Any, x: Any) -> dict[str, tuple[Callable[[], None], Callable[[], Any]]]:
    """name -> (install, uninstall returning the counts it made)."""
    from torch._C._dynamo import eval_frame as c_eval_frame
    from torch._dynamo import eval_frame as ef

    from stance_magic import probe

    orig = ef._callback_from_stance
    getframe = sys._getframe
    get_ident = threading.get_ident

    # torch.compile's callback for f, and the code of its compile_wrapper
    seen: list[Any] = []

    def spy(callback: Any) -> Any:
        if callback is not None and not seen:
            seen.append((callback, getframe(1).f_code))
        return orig(callback)

    ef._callback_from_stance = spy
    try:
        f(x)
    finally:
        ef._callback_from_stance = orig
    key, cw = seen[0]

    def install(cfs: Callable[[Any], Any], hook: Callable[[bool], bool]) -> None:
        ef._callback_from_stance = cfs
        c_eval_frame.set_guard_complete_hook(hook)

    def uninstall() -> None:
        ef._callback_from_stance = orig
        c_eval_frame.set_guard_complete_hook(None)

    def pass_through() -> tuple[Callable[[Any], Any], Callable[[bool], bool]]:
        def cfs(callback: Any) -> Any:
            return orig(callback)

        def hook(cache_hit: bool) -> bool:
            return cache_hit

        return cfs, hook

    counts: dict[str, dict[Any, list[int]]] = {"counting": {}, "checks": {}}

    def counting() -> tuple[Callable[[Any], Any], Callable[[bool], bool]]:
        table = counts["counting"]
        table[key] = [0, 0]
        get = table.get
        state: list[Any] = [None]

        def cfs(callback: Any) -> Any:
            result = orig(callback)
            if callback is None:
                return result
            c = get(callback)
            if c is not None:
                c[0] += 1
                state[0] = c
            return result

        def hook(cache_hit: bool) -> bool:
            c = state[0]
            if c is not None:
                state[0] = None
                if cache_hit:
                    c[1] += 1
            return cache_hit

        return cfs, hook

    def checks() -> tuple[Callable[[Any], Any], Callable[[bool], bool]]:
        table = counts["checks"]
        table[key] = [0, 0]
        get = table.get
        threads = {get_ident(): 1}
        state: list[Any] = [None, 0, ""]

        def cfs(callback: Any) -> Any:
            result = orig(callback)
            if callback is None:
                return result
            fr = getframe(1)
            if fr.f_code is cw and get_ident() in threads:
                c = get(callback)
                if c is not None:
                    c[0] += 1
                    state[0] = c
                    state[1] = id(fr)
                    state[2] = ef._stance.stance
            return result

        def hook(cache_hit: bool) -> bool:
            c = state[0]
            if c is not None and id(getframe(1)) == state[1]:
                state[0] = None
                if cache_hit:
                    c[1] += 1
            return cache_hit

        return cfs, hook

    rec = probe.Recorder()
    marks: list[Any] = []

    def rec_on() -> None:
        marks.append(rec.start())
        for _ in range(probe.SAMPLE_FIRST + 16):  # past the first timed lookups
            f(x)

    def rec_off() -> Any:
        w = rec.stop(marks.pop())
        t = w.targets[0]
        return {"hits": w.hits, "timed": t.timed, "counted only": t.sampled}

    def counted(name: str) -> Callable[[], Any]:
        def off() -> Any:
            uninstall()
            calls, hits = counts[name][key]
            counts[name][key] = [0, 0]
            return {"calls": calls, "hits": hits}

        return off

    p_cfs, p_hook = pass_through()
    c_cfs, c_hook = counting()
    k_cfs, k_hook = checks()
    return {
        "bare": (lambda: None, lambda: None),
        "pass-through": (lambda: install(p_cfs, p_hook), uninstall),
        "counting": (lambda: install(c_cfs, c_hook), counted("counting")),
        "counting + checks": (lambda: install(k_cfs, k_hook), counted("checks")),
        "stance_magic": (rec_on, rec_off),
    }


def run(rounds: int, calls: int) -> dict[str, Any]:
    f, x, loop = _setup()
    variants = _variants(f, x)
    names = list(variants)
    per_call: dict[str, list[float]] = {k: [] for k in names}
    made: dict[str, Any] = {}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            on, off = variants[name]
            on()
            try:
                per_call[name].append(loop(calls))
            finally:
                made[name] = off()
    bare = per_call["bare"]
    out: dict[str, Any] = {"rounds": rounds, "calls": calls, "variants": {}}
    for name in names:
        xs = per_call[name]
        out["variants"][name] = {
            "per_call_s": statistics.median(xs),
            "added_s": statistics.median([a - b for a, b in zip(xs, bare)]),
            "ratio": statistics.median([a / b for a, b in zip(xs, bare)]),
            "counts": made.get(name),
        }
    return out


def format_results(res: dict[str, Any]) -> str:
    lines = [
        f"A tiny compiled function, {res['calls']:,} calls a round, "
        f"{res['rounds']} interleaved rounds (medians; added and ratio paired against bare)",
        f"  {'hooks':<20} {'per call':>9} {'added':>9} {'ratio':>7}  counts (last round)",
        f"  {'-' * 20} {'-' * 9} {'-' * 9} {'-' * 7}  {'-' * 30}",
    ]
    for name, v in res["variants"].items():
        counts = ", ".join(f"{k} {n:,}" for k, n in (v["counts"] or {}).items()) or "-"
        lines.append(
            f"  {name:<20} {v['per_call_s'] * 1e6:>6.2f} µs {v['added_s'] * 1e6:>+6.2f} µs "
            f"{v['ratio']:>6.3f}×  {counts}"
        )
    ours = res["variants"]["stance_magic"]["ratio"]
    verdict = "met" if ours <= TARGET else "missed"
    lines.append(
        f"issue 17's older aspiration for the measured loop, ≤ {OLD_TARGET:.2f}×, lies below "
        f"the counting + checks floor ({res['variants']['counting + checks']['ratio']:.3f}× here)"
    )
    lines.append(
        f"issue 37's target for the measured loop: ≤ {TARGET:.2f}×; here {ours:.3f}×: {verdict}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: 3 rounds of 200 calls")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=4000)
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    rounds, calls = (3, 200) if args.quick else (args.rounds, args.calls)

    t0 = time.perf_counter()
    res = run(rounds, calls)
    res["env"] = jsonenv.environment()
    res["command"] = jsonenv.command("bench_hooks.py", argv)
    res["targets"] = {"loop_ratio": TARGET, "old_loop_ratio": OLD_TARGET}
    print(f"Python {res['env']['python']}, torch {res['env']['torch']}")
    print(format_results(res))
    res["seconds"] = time.perf_counter() - t0
    print(f"(took {res['seconds']:.1f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
