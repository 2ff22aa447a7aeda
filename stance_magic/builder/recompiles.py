"""The report's recompiles: each recompile (its reason, guard source,
every entry's failed guard, the calling line), the refusals, the frames at
their recompile limit, each frame's recompile budget, the trap behind them
(:mod:`stance_magic.causes`), and the dynamic shapes torch made.

torch's wording (recompile reasons, a refusal's guards, the sources and
places of a shape environment) is read by the probe
(:mod:`stance_magic.probe.messages`)."""

from __future__ import annotations

from typing import Any

from .. import causes, probe
from ..paths import short_path
from ..report import (
    Budget,
    CallAccount,
    DynamicShapes,
    FrameCompile,
    GuardFailure,
    Recompile,
    RecompileLimit,
)
from .locating import _file, _place, _stack


def split_recompile_reason(text: str) -> tuple[str, str]:
    """(reason, guard source) from a ``recompile_reason``, the guard's file
    written as the report writes places (see
    :func:`stance_magic.probe.split_recompile_reason`)."""
    return probe.split_recompile_reason(text, short_path)


def _guard_failures(texts: list[str]) -> list[GuardFailure]:
    return [GuardFailure(*split_recompile_reason(t)) for t in texts]


def _recompiles(window: probe.Window, fwd: list[FrameCompile]) -> list[Recompile]:
    failures_by_id = {
        rec.compile_id: rec.info.guard_failures
        for rec in window.compiles
        if rec.info.guard_failures
    }
    stacks_by_id = {
        rec.compile_id: rec.info.user_stack for rec in window.compiles if rec.info.user_stack
    }
    out = []
    for f in fwd:
        if f.recompile_reason:
            reason, pointer = split_recompile_reason(f.recompile_reason)
            stack = stacks_by_id.get(f.compile_id, [])
            out.append(
                Recompile(
                    reason,
                    f.at,
                    f.compile_id,
                    pointer,
                    failures=_guard_failures(failures_by_id.get(f.compile_id, [])),
                    called_from=_stack(stack),
                    stack=_stack(stack),
                )
            )
    return out


def _recompile_limits(window: probe.Window) -> list[RecompileLimit]:
    """Frames at the recompile limit in this cell: the attempt that hit it
    (a record) and every call that then ran eagerly (a miss torch did not
    compile because of it), grouped by frame."""
    out: dict[tuple[Any, ...], RecompileLimit] = {}

    def entry(hit: probe.LimitHit) -> RecompileLimit:
        name, filename, line = hit.frame
        key = (name, filename, line, hit.config)
        lim = out.get(key)
        if lim is None:
            lim = out[key] = RecompileLimit(
                _place(name, filename, line),
                hit.config,
                hit.limit,
                None,
                # (torch's config read where a frame is at its limit, not every cell)
                automatic_dynamic=probe.dynamo_config_flag("automatic_dynamic_shapes"),
                per_call=hit.per_call,
            )
        return lim

    for rec in window.compiles:
        info = rec.info
        hit = info.limit
        if hit is not None:
            lim = entry(hit)
            lim.compile_id = rec.compile_id
            if info.guard_failures and not lim.failures:
                lim.failures = _guard_failures(info.guard_failures)
    for m in window.miss_events:
        if m.outcome == probe.MISS_LIMIT and m.limit is not None:
            entry(m.limit).eager_calls += 1
    return list(out.values())


def _recompile_causes(recompiles: list[Recompile], window: probe.Window) -> list[causes.Cause]:
    """The trap behind each recompile and refusal, from the guard failure
    that decides it (see :func:`stance_magic.causes.decisive`)."""
    defined = {m.compile_id: m.defined for m in window.miss_events if m.compile_id}
    stances = {m.compile_id: m.stance for m in window.miss_events if m.compile_id}
    found: dict[tuple[str, str], causes.Cause] = {}

    def add(failures: list[Any], fallback: str, context: dict[str, Any], stance: str) -> None:
        _, text = causes.decisive(failures, fallback)
        ctx = {
            expr: (name, _file(filename), what)
            for expr, (name, filename, _line, what) in context.items()
        }
        unlinked = stance if probe.delayed_callback_unlinked(stance) else None
        c = causes.identify(text, ctx, unlinked_stance=unlinked) if text else None
        if c is None:
            return
        key = (c.kind, c.subject)
        if key in found:
            found[key].count += 1
        else:
            found[key] = c

    for r in recompiles:
        fallback = f"{r.reason}  ← {r.guard_source}" if r.guard_source else r.reason
        add(r.failures, fallback, defined.get(r.compile_id, {}), stances.get(r.compile_id, ""))
    for m in window.miss_events:
        if m.outcome == probe.MISS_REFUSED and m.failures:
            add(_guard_failures(m.failures), "", m.defined, m.stance)
    return list(found.values())


def _budget(b: probe.FrameBudget) -> Budget:
    """A frame's entries against its recompile limit, placed as the report places frames."""
    name, filename, line = b.frame
    return Budget(_place(name, filename, line), b.entries, b.limit, b.config, b.per_call)


def _dynamic_shapes(window: probe.Window, frames: list[FrameCompile]) -> list[DynamicShapes]:
    where = {f.compile_id: f.at for f in frames}
    out = []
    for rec in window.compiles:
        shapes = rec.info.shapes
        if shapes is None:
            continue
        cid = rec.compile_id
        d = DynamicShapes(cid, where.get(cid, ""))
        # a module's parameters and buffers are graph inputs too, not the user's
        d.inputs = [
            f"{probe.source_as_written(s)}: [{', '.join(dims)}]"
            for s, dims in shapes.inputs
            if not probe.is_module_state(s)
        ]
        d.symbols = [
            f"{sym} = {probe.source_as_written(src)}: {why}" for sym, src, why in shapes.symbols
        ]
        for sym, value, src, guard, loc in shapes.specialized:
            line = f"{sym} = {probe.source_as_written(src)} specialized to {value} by {guard}"
            code, at, site = probe.specialization_site(loc)
            if site is not None:
                at = _place(site[2], site[0], site[1]).within
            if code.strip():
                line += f" at `{code.strip()}`" + (f" ({at.strip()})" if at.strip() else "")
            d.specialized.append(line)
        out.append(d)
    return out


def _refusals(
    window: probe.Window, calls: CallAccount, error: BaseException | None, error_text: str | None
) -> tuple[int, list[str]]:
    """(recompiles refused, the guards the refusals failed on): the
    fail_on_recompile misses, the stance refusals of the call account, or
    torch's refusal raised before any call was seen."""
    refused = [m for m in window.miss_events if m.outcome == probe.MISS_REFUSED]
    refused_guards = [g for m in refused for g in m.failures] or probe.refused_guards(error)
    # a refusal from an empty cache has no miss (no lookup first)
    # (an aot-compiled function's failed guard check is no recompile refused)
    stance_refusals = sum(n for why, n in calls.refused.items() if why != probe.WHY_AOT_GUARDS)
    refused_n = max(len(refused), stance_refusals)
    if not refused_n and (
        refused_guards or (error_text and probe.names_fail_on_recompile(error_text))
    ):
        refused_n = 1  # refused before any call was seen (no call in this torch's hooks)
    return refused_n, refused_guards
