"""docs/performance.md's figures, and the README's, rendered from the
benchmarks' committed JSON.

The pages keep their prose; every table and sentence with a measured figure
sits between markers::

    <!-- perf:NAME:begin -->
    ... rendered here from benchmarks/results/<bench>.json ...
    <!-- perf:NAME:end -->

Run from the repository root::

    .venv/bin/python benchmarks/perf_page.py --check   # exit 1 if the page and the JSON disagree
    .venv/bin/python benchmarks/perf_page.py --write   # re-render the blocks in place

``make perf-page`` reruns the benchmarks into ``benchmarks/results/`` first;
``make perf-page-render`` only renders. Nothing here runs a benchmark or
imports torch: ``tests/test_performance_page.py`` runs the check.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "performance.md"
RESULTS = REPO / "benchmarks" / "results"
FIX = "make perf-page-render (python benchmarks/perf_page.py --write)"

Json = dict[str, Any]


# --------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------


def fmt_s(s: float | None) -> str:
    """Seconds as µs, ms or s, about three significant figures."""
    if s is None or s != s:
        return "n/a"
    if s == 0:
        return "0"
    a = abs(s)
    v, unit = (s * 1e6, "µs") if a < 1e-3 else (s * 1e3, "ms") if a < 1 else (s, "s")
    av = abs(v)
    text = f"{v:.2f}" if av < 10 else f"{v:.1f}" if av < 100 else f"{v:.0f}"
    return f"{text} {unit}".replace("-", "−")


def fmt_d(s: float) -> str:
    """A signed difference."""
    return ("+" if s >= 0 else "−") + fmt_s(abs(s))


def fmt_b(n: float) -> str:
    """Bytes, as the page writes them (222 B, 2.2 kB, 2.2 MB)."""
    for unit, size in (("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            v = n / size
            return f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{n:.0f} B"


def fmt_x(r: float | None, digits: int = 2) -> str:
    return "n/a" if r is None else f"{r:.{digits}f}×"


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    line = lambda cells: "| " + " | ".join(cells) + " |"  # noqa: E731
    return [line(head), line(["---"] * len(head)), *map(line, rows)]


def source(stem: str, data: Json) -> list[str]:
    """How the block's JSON was taken, and the command that retakes it."""
    env = data.get("env", {})
    took = data.get("seconds")
    took_text = f"; took {fmt_s(took)}" if took else ""
    return [
        "",
        f"_From `benchmarks/results/{stem}.json` (`{data.get('command', '?')}`{took_text}; "
        f"{env.get('platform', '?')}, Python {env.get('python', '?')}, "
        f"torch {env.get('torch', '?')}, {env.get('cpus', '?')} CPUs). "
        f"Retake: `make {'perf-page-all' if stem in SLOW else 'perf-page'}`._",
    ]


# --------------------------------------------------------------------------
# the blocks
# --------------------------------------------------------------------------


def _beyond(o: Json) -> float:
    return o["targets"]["cell_beyond_floor_s"]["median"]


def _per_call(o: Json) -> float:
    lp = o["loop"]
    return (lp["cells"]["stance_q"]["median"] - lp["cells"]["bare_pristine"]["median"]) / lp[
        "calls"
    ]


def _cell_cost(o: Json) -> str:
    """What a measured cell adds (``%%stance -q``), the summary's and the README's figure."""
    return fmt_s(o["cells"]["added"]["stance_q"]["median"])


def summary(o: Json) -> list[str]:
    cell = _cell_cost(o)
    return [
        "In short: an unmeasured cell pays nothing per call (the hooks are in torch only while a",
        f"cell is measured); a measured cell pays about {cell}, and each compiled call in it",
        f"about {fmt_s(_per_call(o))} (the first table below, from `bench_overhead.py`); `-m` is",
        "opt-in because reading the allocation events back is not free.",
    ]


def readme_cost(o: Json) -> list[str]:
    """The README's one sentence on what measuring costs (the summary's figures)."""
    cell = _cell_cost(o)
    return [
        "Measuring is cheap: an unmeasured cell pays nothing per call, a measured one about",
        f"{cell}, and a compiled call inside it about {fmt_s(_per_call(o))}",
        "([Performance](https://github.com/stance-magic/stance_magic/blob/main/docs/performance.md)).",
    ]


def overhead(o: Json) -> list[str]:
    c, lp, t = o["cells"], o["loop"], o["targets"]["constants"]
    add = {k: v["median"] for k, v in c["added"].items()}
    time_s = add["time"]
    share, floor_share = add["stance_q"] / time_s, add["noop_magic"] / time_s
    beyond_share = _beyond(o) / time_s
    rc = o["report_cells"]["added"]
    n = lp["calls"]
    tiny = lp["ratio"]["stance_q"]["median"]
    per_call = _per_call(o)
    model = 1 + max(per_call, 0.0) / t["model_call_s"]
    im = o["import"]
    heavy = im["heavy_loaded"]
    rows = [
        [
            "plain empty cell, extension loaded vs not (the `pre/post_run_cell` hooks)",
            f"{fmt_d(add['plain'])} per cell ({fmt_s(c['cells']['plain']['median'])} vs "
            f"{fmt_s(c['cells']['plain_no_hooks']['median'])})",
            "",
        ],
        [
            "a cell under a registered no-op cell magic vs the same cell plain: IPython's own "
            "cost of any cell magic, the floor",
            f"{fmt_d(add['noop_magic'])} per cell",
            "",
        ],
        [
            "empty cell under `%%stance -q` vs the same cell plain",
            f"**{fmt_d(add['stance_q'])}** per cell",
            "",
        ],
        [
            "the same cell under `%%time` (output captured), for reference",
            f"{fmt_d(time_s)} per cell",
            "",
        ],
        [
            "`%%stance -q`'s added time as a share of `%%time`'s",
            f"**{share:.2f}** (the floor alone is {floor_share:.2f})",
            f"≤ {t['cell_vs_time']}: {verdict(share <= t['cell_vs_time'])}",
        ],
        [
            "what `%%stance -q` adds beyond that floor, as a share of `%%time`'s",
            f"**{beyond_share:.2f}** ({fmt_d(_beyond(o))} per cell)",
            f"≤ {t['cell_beyond_floor']}: {verdict(beyond_share <= t['cell_beyond_floor'])}",
        ],
        [
            "an empty cell that shows its report, `%%stance --no-plot` / `%%stance`",
            f"{fmt_d(rc['stance_report']['median'])} / {fmt_d(rc['stance_chart']['median'])} "
            "(no chart: nothing compiled)",
            "",
        ],
        [
            f'{n:,} calls to a tiny compiled function (`backend="eager"`, '
            f"{fmt_s(lp['cells']['bare_pristine']['median'] / n)} a call) under "
            '`%%stance -q default` vs a bare `with torch.compiler.set_stance("default"):` cell',
            f"{fmt_s(lp['cells']['stance_q']['median'])} vs "
            f"{fmt_s(lp['cells']['bare_pristine']['median'])}, **{tiny:.3f}×** paired: "
            f"{fmt_d(per_call)} a call",
            f"≤ {t['tiny_loop_ratio']:.2f}×: {verdict(tiny <= t['tiny_loop_ratio'])} "
            f"(issue 17's older ≤ {t['old_tiny_loop_ratio']:.2f}×: "
            f"{verdict(tiny <= t['old_tiny_loop_ratio'])})",
        ],
        [
            f"that per-call time on a model call of {fmt_s(t['model_call_s'])}",
            f"**{model:.4f}×**",
            f"≤ {t['loop_ratio']:.2f}×: {verdict(model <= t['loop_ratio'])}",
        ],
        [
            "`CellReport._repr_html_()` / `str()` of a report with "
            f"{o['render']['compiles']} compiled frames",
            f"{fmt_s(o['render']['html']['median'])} / {fmt_s(o['render']['text']['median'])}",
            "",
        ],
        [
            "`import stance_magic` in a fresh interpreter (`python -c` minus `python -c pass`) "
            "/ with IPython already imported",
            f"{fmt_s(im['added']['median'])} / {fmt_s(im['in_ipython']['median'])}",
            "",
        ],
        [
            "modules loaded by `import stance_magic`",
            "torch, matplotlib, ipywidgets: " + (", ".join(heavy) if heavy else "none"),
            f"none: {verdict(not heavy)}",
        ],
    ]
    load = o.get("load_ext_s")
    return [
        f"{c['rounds']} interleaved rounds of {c['batch']} cells each (the loop: "
        f"{lp['rounds']} rounds); medians, and the added times paired per round:",
        "",
        *table(["what", "measured", "goal"], rows),
        "",
        f"One-time costs: `%load_ext stance_magic` imports torch ({fmt_s(load)} here); the "
        f"first `%%stance` cell of a session took {fmt_s(c['first_stance_cell_s'])}.",
    ]


HOOK_ROWS = {
    "pass-through": "pass-through (torch's dispatcher called, the guard hook's argument returned)",
    "counting": "counting (a dict lookup per call, a hit added per lookup; no checks)",
    "counting + checks": "counting + the checks exact counts need (frame, thread, stance)",
    "stance_magic": "stance_magic (a window open, past the first lookups of a cell)",
}


def hooks(h: Json) -> list[str]:
    v = h["variants"]
    rows = []
    for key, label in HOOK_ROWS.items():
        ratio = fmt_x(v[key]["ratio"], 3)
        if key == "counting + checks":
            ratio = f"**{ratio}**"
        rows.append([label, fmt_d(v[key]["added_s"]), ratio])
    t = h.get("targets", {"loop_ratio": 1.12, "old_loop_ratio": 1.05})
    ours, floor = v["stance_magic"]["ratio"], v["counting + checks"]["ratio"]
    return [
        f"{h['rounds']} interleaved rounds of {h['calls']:,} calls; the bare call took "
        f"{fmt_s(v['bare']['per_call_s'])}:",
        "",
        *table(["hooks on every compiled call", "added per call", "ratio"], rows),
        "",
        f"Issue 37's target for the measured loop, ≤ {t['loop_ratio']:.2f}×, is "
        f"{verdict(ours <= t['loop_ratio'])} here ({ours:.3f}×). Issue 17's older "
        f"≤ {t['old_loop_ratio']:.2f}× is below what a Python hook can do with exact counts "
        f"({floor:.3f}× here): it would need the per-call counting out of Python (a C "
        "extension), which this project does not have.",
    ]


def guards(g: Json) -> list[str]:
    ms = g["models"]
    head = ["per lookup", *(f"{m['model']}; {fmt_s(m['per_call_s'])} a call" for m in ms)]

    def ratio(a: float | None, b: float | None) -> str:
        return fmt_x(a / b) if a is not None and b and b > 0 else "n/a"

    def row(label: str, cell: Callable[[Json], str]) -> list[str]:
        return [label, *(cell(m) for m in ms)]

    added = g["added_per_call_s"]
    rows = [
        row("stance_magic (the report's figure, in situ)", lambda m: f"**{fmt_s(m['ours_s'])}**"),
        row(
            "the profiler's `TorchDynamo Cache Lookup` events",
            lambda m: f"{fmt_s(m['profiler_s'])} (report {ratio(m['ours_s'], m['profiler_s'])})",
        ),
        row(
            "outside clock: default minus `-u`, per call",
            lambda m: (
                f"{fmt_s(m['outside_s'])} (report **{ratio(m['ours_s'], m['outside_s'])}**; "
                f"IQR {fmt_s(m['outside_q1_s'])} to {fmt_s(m['outside_q3_s'])})"
            ),
        ),
        row(
            "stance_magic under `-u` (frame locals, the guards `-u` keeps)",
            lambda m: fmt_s(m["ours_skip_s"]),
        ),
        row(
            "stance_magic, default minus `-u` (what `-u` saves, in situ)",
            lambda m: (
                f"{fmt_s(m['ours_saved_s'])} "
                f"({ratio(m['ours_saved_s'], m['outside_s'])} the outside clock)"
            ),
        ),
        row(
            "the guard check timed back to back, warm, at compile time",
            lambda m: (
                f"{fmt_s(m['warm_check_s'])} "
                f"(the report is {ratio(m['ours_s'], m['warm_check_s'])})"
            ),
        ),
        row(
            "a loop measured vs bare (IQR: the rounds' noise)",
            lambda m: f"{m['overhead_ratio']:.3f}× ({m['overhead_q1']:.3f}–{m['overhead_q3']:.3f})",
        ),
        [
            "the hooks' own time per call (a tiny compiled function)",
            f"{fmt_s(added)}: {1 + added / 3e-3:.4f}× on a 3 ms call",
            *([""] * (len(ms) - 1)),
        ],
    ]
    return [
        f"{g.get('threads', 1)} intra-op thread(s); {g.get('calls_per_loop', '?')} calls a loop, "
        f"medians of {g.get('loops', '?')} loops; the outside clock is the median of "
        f"{g.get('clock_rounds', '?')} paired rounds:",
        "",
        *table(head, rows),
    ]


def memory(m: Json) -> list[str]:
    rows = [
        [
            w["workload"],
            fmt_s(w["off_s"]),
            f"{fmt_s(w['on_s'])} ({w['ratio']:.2f}×)",
            f"{fmt_s(w['on_until_report_s'])} ({w['ratio_until_report']:.2f}×)",
            f"{w['events']:,.0f}",
        ]
        for w in m["workloads"]
    ]
    p = m["first_call_peaks"]
    etc, aot = p["eager_then_compile"], p["aot_eager_then_compile"]
    return [
        f"{m.get('rounds', '?')} interleaved rounds, medians of paired ratios:",
        "",
        *table(
            [
                "workload",
                "without `-m`",
                "with `-m`: the cell",
                "with `-m`: until the report",
                "events read",
            ],
            rows,
        ),
        "",
        "The same script's first-call peaks for the training step, from cold: "
        + ", ".join(f"`{k}` {fmt_b(v)}" for k, v in p.items())
        + f" ({aot / etc - 1:+.0%} against `eager_then_compile`).".replace("-", "−"),
    ]


PANEL_ROWS = {
    "trivial": "trivial `x = 1`, watch on",
    "warm": "warm compiled call `y = f(x)` (cache hits), panel collapsed",
    "warm_open": "the same, live area open",
}


def panel(p: Json) -> list[str]:
    rows = []
    target = p.get("target_ratio", 1.1)
    for key, label in PANEL_ROWS.items():
        c = p["cells"][key]
        r = c["ratio"]
        inside = c["in_panel"]["median"]
        own = 1 + inside / c["none"]["median"]
        goal = ""
        ratio = f"{r['median']:.2f}×"
        if key == "trivial":
            ratio = f"**{ratio}** (rounds' IQR {r['q1']:.2f}–{r['q3']:.2f})"
            ok = min(r["median"], own) <= target
            goal = f"≤ {target}×: {verdict(ok)}"
        rows.append(
            [
                f"{label} ({r['n']} rounds)",
                fmt_s(c["open"]["median"]),
                fmt_s(c["none"]["median"]),
                ratio,
                f"{fmt_s(inside)} a cell ({own:.3f}×)",
                goal,
            ]
        )
    return [
        f"{p['history_before']} cells run first; rounds of {p['batch']} cells:",
        "",
        *table(
            [
                "cell",
                "panel open",
                "no panel",
                "ratio (median of rounds)",
                "panel's own time",
                "goal",
            ],
            rows,
        ),
    ]


def _iqr(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def ranks(r: Json) -> list[str]:
    med = statistics.median
    two = r["two_ranks"]
    r0 = two["0"]
    s_b, f_b = r0["summary_bytes"], r0["full_bytes"]
    diffs = {
        k: [b - a for a, b in zip(two[k]["cell_plain"], two[k]["cell_ranks"])] for k in ("0", "1")
    }
    lo, hi = _iqr(diffs["0"] + diffs["1"])
    rows = [
        [
            "payload a rank sends: summary / full report (a cell with "
            f"{r0['report']['compiles']} compiles and {r0['report']['recompiles']} recompile)",
            f"{fmt_b(s_b)} / {fmt_b(f_b)}",
        ],
        [
            "`gather` (`stance_magic.builder.ranks`) alone at rank 0, ranks aligned by a "
            "barrier: summary / full",
            f"{fmt_s(med(r0['gather_summary']))} / {fmt_s(med(r0['gather_full']))}",
        ],
        [
            f"torch's two collectives inside it, bare: `all_gather` of one integer; "
            f"`gather` of {fmt_b(s_b)}",
            f"{fmt_s(med(r0['all_gather_1']))}; {fmt_s(med(r0['gather_summary_bytes']))}",
        ],
        [
            "an empty cell, `%%stance -q --ranks` over `%%stance -q` "
            f"({fmt_s(med(r0['cell_plain']))}), rank 0 / rank 1",
            f"**{fmt_d(med(diffs['0']))} / {fmt_d(med(diffs['1']))}** per cell "
            f"(both ranks' paired IQR {fmt_s(lo)} to {fmt_s(hi)})",
        ],
    ]
    net = fmt_s(r.get("net_step_s", 100e-6))
    proj = []
    for n, p in r["projection"].items():
        last = (
            "" if n == "2" else f"{fmt_s(p['summary_s_net_step'])} / {fmt_s(p['full_s_net_step'])}"
        )
        proj.append(
            [
                n + (" (measured)" if n == "2" else ""),
                f"{fmt_b(p['summary_bytes'])} / {fmt_b(p['full_bytes'])}",
                f"{fmt_s(p['summary_s'])} / {fmt_s(p['full_s'])}",
                last,
            ]
        )
    w = r["rank0_work"]
    big = [n for n in w if n != "2"]
    work = (
        "Rank 0's own work, measured in one process for N summaries: unpickling "
        + " and ".join(f"{fmt_s(w[n]['unpickle_s'])} ({n})" for n in big)
        + ", building the view "
        + " and ".join(fmt_s(w[n]["build_s"]) for n in big)
        + ", its text and HTML "
        + " and ".join(f"{fmt_s(w[n]['text_s'])} / {fmt_s(w[n]['html_s'])}" for n in big)
        + ", the chart "
        + " and ".join(fmt_s(w[n]["chart_s"]) for n in big)
        + " (drawn only when something compiled); full reports take "
        + " and ".join(f"{fmt_s(w[n]['full_unpickle_s'])} ({n})" for n in big)
        + " to unpickle."
    )
    return [
        "Two processes, gloo over loopback, medians:",
        "",
        *table(["what (2 ranks, measured)", "figure"], rows),
        "",
        *table(
            [
                "N ranks (projected)",
                "bytes at rank 0: summary / full",
                "time at rank 0: summary / full",
                f"with a {net} network step",
            ],
            proj,
        ),
        "",
        work,
    ]


WARM_ROWS = {
    "cold": "(a) cold: an empty cache directory",
    "disk": "(b) the on-disk caches of (a), in a new kernel",
    "load": "(c) an empty directory + `%stance cache load` of (a)'s file",
    "pc-cold": "(d) precompile on, cold",
    "pc-disk": "(e) precompile on, the on-disk caches of (d)",
    "pc-load": "(f) precompile on, an empty directory + load of (d)'s file",
}


WARM_MODELS = {
    "tour": "tour block (LayerNorm + MLP, 1024×128, `no_grad`)",
    "tour-train": "the same block's training step",
    "gpt2": "GPT-2 (small `GPT2Config`, 8-token prompt, `no_grad`)",
}


def warm_start(w: Json) -> list[str]:
    models = w["models"]
    names = list(models)
    rows = []
    for key, label in WARM_ROWS.items():
        cells = []
        for name in names:
            s = models[name].get(key)
            if s is None:
                cells.append("")
                continue
            r = s["ratio"]
            ratio = f"{r['median']:.2f}×" + (
                f" (rounds {r['q1']:.2f}–{r['q3']:.2f}×)" if r["n"] > 1 else ""
            )
            cells.append(f"{fmt_s(s['first_s']['median'])}: {ratio}")
        rows.append([label, *cells])
    keys = [k for k in WARM_ROWS if k in models[names[0]]]
    letters = " / ".join(WARM_ROWS[k][:3] for k in keys)
    rows += [
        [
            f"the first call alone (after `torch.compile`), ratio to (a)'s, in {letters}",
            *(
                " / ".join(
                    f"{fmt_s(models[n][k]['first_call_s']['median'])}: "
                    f"{models[n][k]['call_ratio']['median']:.3f}×"
                    if "call_ratio" in models[n][k]
                    else "-"
                    for k in keys
                )
                for n in names
            ),
        ],
        [
            f"Dynamo tracing that remains in {letters}",
            *(" / ".join(fmt_s(models[n][k]["dynamo_s"]["median"]) for k in keys) for n in names),
        ],
        [
            f"FX graph cache hits/misses in {letters}",
            *(", ".join(models[n][k]["fx"] for k in keys) for n in names),
        ],
        [
            f"AOTAutograd cache hits/misses in {letters}",
            *(", ".join(models[n][k]["aot"] for k in keys) for n in names),
        ],
        [
            "C++ binaries built (new in the cache directory, less those a loaded file brought)",
            *(" / ".join(str(models[n][k]["kernels_compiled"]) for k in keys) for n in names),
        ],
        [
            "cache file (`%stance cache save` after (a))",
            *(fmt_b(models[n]["saved_bytes"] or 0) for n in names),
        ],
    ]
    goals = []
    ratio_c = models.get("tour", {}).get("load", {}).get("ratio", {}).get("median")
    if ratio_c is not None:
        goals.append(
            f"The goal for (c), 0.2× of (a) on the tour model, is {verdict(ratio_c <= 0.2)} "
            f"here ({ratio_c:.3f}×)."
        )
    pc = [(n, k, models[n][k]) for n in names for k in ("pc-disk", "pc-load") if k in models[n]]
    if pc:
        goals.append(
            "The goal for (e) and (f), 0.05× of (a) on each model, from `torch.compile`: "
            + "; ".join(
                f"{n} {WARM_ROWS[k][:3]} {s['ratio']['median']:.3f}× "
                f"{verdict(s['ratio']['median'] <= 0.05)}"
                for n, k, s in pc
            )
            + "."
        )
    calls = [(n, k, s["call_ratio"]["median"]) for n, k, s in pc if "call_ratio" in s]
    if calls:
        goals.append(
            "The first call alone, the measure of the issue's own figures (0.003 s against "
            "9.8 s): "
            + "; ".join(
                f"{n} {WARM_ROWS[k][:3]} {r:.4f}× {verdict(r <= 0.05)}" for n, k, r in calls
            )
            + "."
        )
    return [
        f"Medians of {w['rounds']} round(s), ratios per round to (a), under Inductor:",
        "",
        *table(
            ["first compiled result in a fresh kernel", *(WARM_MODELS.get(n, n) for n in names)],
            rows,
        ),
        *(["", " ".join(goals)] if goals else []),
    ]


def nested(n: Json) -> list[str]:
    med = n["median_s"]
    if not n["monitoring"]:
        return [
            f"On Python {n['env']['python']} there are no `sys.monitoring` events (3.12+), so the "
            "committed run times the top-level lookups only: the report's median lookup "
            f"{fmt_s(n['report_lookup_s'])} against the profiler's "
            f"{fmt_s(n['profiler_lookup_s'])}, and a measured generation at "
            f"{n['measured_vs_plain']:.3f}× a plain one ({fmt_s(med['measured'])} vs "
            f"{fmt_s(med['plain'])}). Run it on 3.12+ for the nested figures.",
        ]
    return [
        f"{n['rounds']} interleaved rounds: {n['untimed_max']} lookups left untimed per "
        f"measured cell, the report's median lookup {fmt_s(n['report_lookup_s'])} against the "
        f"profiler's {fmt_s(n['profiler_lookup_s'])} "
        f"({n['report_lookup_s'] / n['profiler_lookup_s']:.2f}×), and a measured generation "
        f"at {n['events_on_vs_off']:.3f}× what it costs with the monitoring events off "
        f"({fmt_s(med['measured'])} vs {fmt_s(med['events_off'])}).",
    ]


MODEL_TEXT = {
    "gpt2": "GPT-2 (`GPT2LMHeadModel`, 2 layers, 64 wide, 8 tokens)",
    "bert": "BERT (`BertModel`, 2 layers, 64 wide, 16 tokens)",
}
MODEL_SHORT = {"gpt2": "GPT-2", "bert": "BERT"}
WAY_TEXT = {
    "q": "`%%stance -q`",
    "report": "`%%stance`",
    "measure": "`measure()`",
}


def models(m: Json) -> list[str]:
    t = m["targets"]
    rows = []
    for r in m["summary"]["rows"]:
        targeted = r["mode"] in t["targeted"]
        first, steady = r["first"], r["steady"]
        wall = r["wall_vs_outside"]
        cells = " / ".join(f"{x:.3f}" for x in first)
        rows.append(
            [
                MODEL_SHORT.get(r["model"], r["model"]),
                f"`{r['backend']}`",
                WAY_TEXT.get(r["mode"], r["mode"]),
                fmt_s(r["plain_cell_s"]),
                f"**{cells}**" if targeted else cells,
                f"**{fmt_x(steady, 3)}**" if targeted else fmt_x(steady, 3),
                "n/a" if wall is None else f"{wall:.3f}",
                f"{verdict(r['first_ok'])} / {verdict(r['steady_ok'])}" if targeted else "",
            ]
        )
    loads = [r["load_s"] for r in m["summary"]["rows"]]
    first_cells = [r["process_first_s"] for r in m["summary"]["rows"]]
    names = " and ".join(
        MODEL_TEXT.get(k, k) for k in dict.fromkeys(r["model"] for r in m["summary"]["rows"])
    )
    # (runs before that key stored the history of the measured cells only)
    stored = ", every cell storing its history" if m.get("history_stored") else ""
    steady_n = round(statistics.median(len(r["cells"]) - 3 for r in m["runs"]))
    return [
        f"{names}; {m['calls']} steady-state calls a cell (cache hits, `no_grad`). Each "
        "figure is a measured cell's time over the plain cells beside it, by an outside clock "
        f"(IPython's `run_cell`{stored}), the median of {m['processes']} fresh processes "
        f"(a process's steady state: the median of its {steady_n} cells after the first three); "
        "the targets "
        f"(for `%%stance -q` and `measure()`): the model's first measured cell ≤ {t['first']}×, "
        f"the steady state ≤ {t['steady']}×:",
        "",
        *table(
            [
                "model",
                "backend",
                "with",
                "plain cell",
                "first 3 measured cells",
                "steady",
                "wall / outside",
                "targets",
            ],
            rows,
        ),
        "",
        "The first three measured cells of a function calibrate its lookup with torch's "
        "profiler (about a millisecond each, in the report's wall time); `wall / outside` is "
        "what the report's wall time holds of the cell a user waited for (the rest is "
        "IPython's and the front end's own work around the block, and building the report). "
        "What a process pays once is apart: loading the extension (`%load_ext stance_magic`: "
        f"the engine's imports) took {fmt_s(statistics.median(loads))} (`measure()` without "
        "it pays the same at its first block), and the process's first measured cell, a tiny "
        "function's run before the model's (the magic's and the report's first use), "
        f"{fmt_s(statistics.median(first_cells))} more than the same cell plain.",
    ]


#: block name -> (the JSON's stem in benchmarks/results/, its renderer)
BLOCKS: dict[str, tuple[str, Callable[[Json], list[str]]]] = {
    "summary": ("overhead", summary),
    "overhead": ("overhead", overhead),
    "hooks": ("hooks", hooks),
    "guards": ("guards", guards),
    "memory": ("memory", memory),
    "panel": ("panel", panel),
    "ranks": ("ranks", ranks),
    "warm-start": ("warm_start", warm_start),
    "nested": ("nested", nested),
    "models": ("models", models),
    "readme-cost": ("overhead", readme_cost),
}

#: The pages that hold generated blocks, and which: every figure the README
#: gives is the same JSON's as the performance page's (``--check`` reads both).
README = REPO / "README.md"
PAGES: dict[Path, tuple[str, ...]] = {
    PAGE: tuple(n for n in BLOCKS if n != "readme-cost"),
    README: ("readme-cost",),
}
#: blocks that end with no line on how their figures were taken (a sentence
#: whose page says it elsewhere)
BARE = ("summary", "readme-cost")

#: benchmarks too slow for ``make perf-page`` (``make perf-page-all`` reruns them too)
SLOW = ("warm_start", "models")


# --------------------------------------------------------------------------
# the page
# --------------------------------------------------------------------------


def render_block(name: str, results: Path = RESULTS) -> str:
    stem, fn = BLOCKS[name]
    path = results / f"{stem}.json"
    if not path.exists():
        lines = [
            f"_No figures: `benchmarks/results/{stem}.json` is not committed. "
            f"Take it with `.venv/bin/python benchmarks/bench_{stem}.py --json "
            f"benchmarks/results/{stem}.json`, then `make perf-page-render`._"
        ]
    else:
        data = json.loads(path.read_text("utf-8"))
        lines = fn(data)
        if name not in BARE:
            lines += source(stem, data)
    return "\n".join(lines)


def markers(name: str) -> tuple[str, str]:
    return f"<!-- perf:{name}:begin -->", f"<!-- perf:{name}:end -->"


def blocks_of(text: str, names: tuple[str, ...] = PAGES[PAGE]) -> dict[str, str]:
    """Each generated block's body as the page holds it (``names``: the
    page's blocks; the performance page's by default)."""
    out = {}
    for name in names:
        begin, end = markers(name)
        if text.count(begin) != 1 or text.count(end) != 1:
            raise ValueError(f"expected one {begin} and one {end}")
        out[name] = text.split(begin, 1)[1].split(end, 1)[0].strip("\n")
    return out


def render(text: str, results: Path = RESULTS, names: tuple[str, ...] = PAGES[PAGE]) -> str:
    """The page with every block re-rendered from ``results``."""
    for name in names:
        begin, end = markers(name)
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{render_block(name, results)}\n{end}{tail}"
    return text


def stale(text: str, results: Path = RESULTS, names: tuple[str, ...] = PAGES[PAGE]) -> list[str]:
    """The blocks whose text differs from what the JSON renders to."""
    have = blocks_of(text, names)
    return [n for n in names if have[n] != render_block(n, results)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if a block is stale")
    mode.add_argument("--write", action="store_true", help="re-render the blocks in place")
    ap.add_argument(
        "--page", type=Path, help="only this copy of docs/performance.md (default: every page)"
    )
    args = ap.parse_args(argv)
    pages = {args.page: PAGES[PAGE]} if args.page is not None else PAGES
    bad = 0
    for page, names in pages.items():
        text = page.read_text("utf-8")
        if args.write:
            new = render(text, names=names)
            if new != text:
                page.write_text(new, "utf-8")
            blocks = f"{len(names)} block" + ("s" if len(names) != 1 else "")
            print(f"{page}: {blocks} rendered from {RESULTS}")
            continue
        for name in stale(text, names=names):
            bad += 1
            print(
                f"{page}: block perf:{name} differs from "
                f"benchmarks/results/{BLOCKS[name][0]}.json; fix: {FIX}"
            )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
