"""A tiny Inductor model for the warm-start truth tests: imported by the tests,
and run as a script for "a second process" (same cache directory, or a fresh
one with ``--load FILE``).

As a script it compiles the model once under ``stance_magic.measure()`` and
prints one JSON object: the report's cache figures, torch's own records and
counters for the same compile, the cache directory's files for each key and
the C++ binaries torch's builder built.
"""

from __future__ import annotations

import json
import os
import sys

import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)).sum(-1)


def make() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return Tiny(), torch.randn(4, 16, requires_grad=True)


def step(cmodel: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Forward and backward: AOTAutograd caches only training graphs here."""
    y = cmodel(x)
    y.sum().backward()
    return y


def records_during(get_metrics, fn, *args) -> list:
    """torch's compile records of ``fn(*args)`` measured under
    ``stance_magic.measure()``, selected by time (torch's record deque keeps
    64, so counting from its length fails in a long run), then the report."""
    import time

    import stance_magic

    t0 = time.time_ns() // 1000
    with stance_magic.measure() as rep:
        fn(*args)
    t1 = time.time_ns() // 1000
    return [r for r in get_metrics() if t0 <= (r.start_time_us or 0) <= t1] + [rep]


def phases(rep, records) -> list[dict]:
    """Each compile's phases as the report splits them, beside the fields of
    torch's record they are read from (µs, None where torch left one unset)."""
    out = []
    for r in records:
        if getattr(r, "is_runtime", False):
            continue
        kind = "frame" if r.co_name is not None else "backward"
        frame = next(
            (f for f in rep.frames if f.compile_id == str(r.compile_id) and f.kind == kind), None
        )
        if frame is None:
            continue
        out.append(
            {
                "kind": kind,
                "ours": frame.phases,
                "seconds": frame.seconds,
                "torch": {
                    "total_s": r.entire_frame_compile_time_s or (r.duration_us or 0) / 1e6,
                    "dynamo_us": r.dynamo_cumulative_compile_time_us,
                    "aot_us": r.aot_autograd_cumulative_compile_time_us,
                    "inductor_us": r.inductor_cumulative_compile_time_us,
                    "codegen_us": r.inductor_code_gen_cumulative_compile_time_us,
                    "aot_hits": r.aotautograd_local_cache_hit_count,
                    "fx_hits": r.inductor_fx_local_cache_hit_count,
                },
            }
        )
    return out


def figures(rep, records, counters_grown) -> dict:
    """The report's cache figures with torch's for the same compile."""
    from stance_magic.probe import caches as pc

    keys: dict[str, list[str]] = {}
    for f in rep.frames:
        for use in f.caches:
            keys.setdefault(use.cache, []).extend(use.keys)
    return {
        "report": {
            "fx_hits": rep.compile_caches.fx_hits,
            "fx_misses": rep.compile_caches.fx_misses,
            "aot_hits": rep.compile_caches.aot_hits,
            "aot_misses": rep.compile_caches.aot_misses,
            "state": rep.compile_caches.state,
            "verdict": rep.compile_caches.verdict,
            "loaded_from": rep.compile_caches.loaded_from,
            "compile_s": rep.compile_s,
            "dynamo_s": rep.compile_breakdown.get("dynamo", 0.0),
            "loaded_s": rep.compile_caches.loaded_s,
            "generated_s": rep.compile_caches.generated_s,
            "saved_s": rep.compile_caches.saved_s,
        },
        "records": {
            f"{cache}_{outcome}": sum(pc.record_count(r, cache, outcome) for r in records)
            for cache in (pc.INDUCTOR, pc.AOT_AUTOGRAD)
            for outcome in ("hit", "miss")
        },
        "counters": {f"{c}_{o}": n for (c, o), n in counters_grown.items()},
        "keys": keys,
        "files": {
            cache: [os.path.exists(pc.entry_path(cache, k)) for k in ks]
            for cache, ks in keys.items()
        },
        "cache_dir": pc.cache_dir(),
        "phases": phases(rep, records),
    }


def main(argv: list[str]) -> int:
    from torch._dynamo.utils import get_compilation_metrics

    import stance_magic
    from stance_magic.probe import caches as pc

    out: dict = {}
    # torch's own C++ builds in this process, counted at torch's builder
    # (not through stance_magic): what a load without the kernels pays
    from torch._inductor import cpp_builder

    builds = []
    build = cpp_builder.CppBuilder.build

    def counted_build(self, *args, **kwargs):
        builds.append(self.get_target_file_path())
        return build(self, *args, **kwargs)

    cpp_builder.CppBuilder.build = counted_build
    # torch's CPU-feature probes (a child process that loads each check's
    # binary), counted at torch's function
    from torch._inductor import cpu_vec_isa

    probes = []
    probe_load = getattr(cpu_vec_isa.VecISA, "_probe_load", None)
    if probe_load is not None:

        def counted_probe(self, output_path):
            probes.append(output_path)
            return probe_load(self, output_path)

        cpu_vec_isa.VecISA._probe_load = counted_probe
    if "--load" in argv:
        info = stance_magic.load_cache(argv[argv.index("--load") + 1])
        out["loaded"] = {"counts": info.counts, "cache_dir": info.cache_dir}
    model, x = make()
    cmodel = torch.compile(model)
    before = pc.counters_snapshot()
    if "--no-aot-cache" in argv:
        torch._functorch.config.enable_autograd_cache = False
    records = records_during(get_compilation_metrics, step, cmodel, x)
    rep = records.pop()
    now = pc.counters_snapshot()
    out.update(figures(rep, records, {k: now[k] - before[k] for k in now}))
    out["text"] = str(rep)
    # the binaries built (torch also runs its builder to preprocess a header)
    out["cpp_built"] = [b for b in builds if b.endswith(".so")]
    out["cpp_builds"] = len(out["cpp_built"])
    out["isa_probes"] = len(probes)
    out["load_ok_markers"] = pc.load_ok_markers()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
