"""The report's calls and cache lookups: every call by how it ended (the
call account), each function's lookups timed and extrapolated, their median,
and a compiled call part by part (the wrapper, the way into Dynamo, the
lookup, the compiled code, an eager call)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from .. import probe
from ..report import CallAccount, CallParts, Lookups, LookupTarget
from .locating import _place

#: The lookups of a window that saw none (frozen; its empty list is never grown:
#: nothing but the builder writes a report's parts).
_NO_LOOKUPS = Lookups(seconds=0.0)


def _account(window: probe.Window) -> CallAccount:
    """The window's calls by how each ended (see probe.Recorder._resolve)."""
    by: dict[str, dict[str, int]] = {
        probe.CALL_EAGER: {},
        probe.CALL_REFUSED: {},
        probe.CALL_FAILED: {},
    }
    cached = compiled = 0
    for (outcome, why), n in window.calls.items():
        if outcome == probe.CALL_CACHED:
            cached += n
        elif outcome == probe.CALL_COMPILED:
            compiled += n
        else:
            by[outcome][why] = by[outcome].get(why, 0) + n
    return CallAccount(
        cached=cached,
        compiled=compiled,
        eager=by[probe.CALL_EAGER],
        refused=by[probe.CALL_REFUSED],
        failed=by[probe.CALL_FAILED],
    )


def _lookup_estimate(t: Any, share: float | None) -> tuple[float, list[tuple[float, float]]]:
    """(seconds, (lookup seconds, weight) pairs) for one function's lookups,
    each timed span times ``share`` where torch's profiler bounded them.

    Stratified: the first timed lookups stand for themselves; the calls
    torch's profiler ran over (a calibration) for themselves, by the
    profiler's own events past its warm-up (the cell's timed calls are then
    its first ones, which are slower); each spot check after them (1 in
    ``probe.SAMPLE_EVERY``) for its share of the other counted-only ones, so
    the cell's first, slower lookups do not stand for the rest. Without a
    spot check yet, every timed lookup and event shares them alike."""
    k = 1.0 if share is None else share
    events = t.profiler_events if share is not None else []
    weighted = [(x * k, 1.0) for x in t.samples]
    seconds = t.seconds * k
    count = t.timed
    rest = t.sampled
    if events:
        w = t.calibrated / len(events)
        weighted += [(x, w) for x in events]
        seconds += sum(events) * w
        count += t.calibrated
        rest -= t.calibrated
    if not weighted:
        return 0.0, []
    if not rest:
        return seconds, weighted
    spots = t.spot_samples
    if not spots:
        scale = (count + rest) / count
        return seconds * scale, [(x, w * scale) for x, w in weighted]
    extra = rest / len(spots)  # each spot check's share of the counted-only
    return seconds + sum(spots) * k * extra, weighted + [(x * k, extra) for x in spots]


def _weighted_median(pairs: list[tuple[float, float]]) -> float | None:
    """The lookup time below and above which half the weight lies."""
    if not pairs:
        return None
    pairs = sorted(pairs)
    half = sum(w for _, w in pairs) / 2
    run = 0.0
    for i, (x, w) in enumerate(pairs):
        run += w
        if run > half:
            return x
        if run == half and i + 1 < len(pairs):  # an even split: the mean of the two
            return (x + pairs[i + 1][0]) / 2
    return pairs[-1][0]


def _lookups(window: probe.Window, profiled: list[float] | None) -> Lookups:
    """Cache lookups: timed in situ (default), or from the profiler (-g).

    In situ, a function whose lookup torch's profiler bounded (see
    :mod:`stance_magic.probe.anatomy`) has each of its own lookups bounded
    alike: the span from torch.compile's dispatch to the end of the lookup,
    times the share of it the profiler shows is the lookup."""
    weighted_all: list[tuple[float, float]] = []
    targets = []
    bounded = bool(window.targets)
    for t in window.targets:
        # nested lookups are timed from the call that made them: no share
        share = t.lookup_share if not t.resumed else None
        if share is None and t.timed:
            bounded = False
        seconds, weighted = _lookup_estimate(t, share)
        weighted_all += weighted
        per_lookup = _weighted_median(weighted)
        targets.append(
            LookupTarget(
                name=t.name,
                where=_place(t.name, t.filename, t.line),
                timed=t.timed,
                seconds=seconds,
                untimed=t.untimed,
                misses=t.misses,
                eager_calls=t.eager_calls,
                per_lookup_s=per_lookup,
                sampled=t.sampled,
                calibrated=t.calibrated,
                waited=t.waited,
                parts=_call_parts(t, share, per_lookup),
                sample_first=t.sample_first,
                sample_every=t.sample_every,
            )
        )
    # the sampling the cell's functions were counted under, where one for all
    sampling = {(t.sample_first, t.sample_every) for t in targets if t.sample_every}
    first, every = sampling.pop() if len(sampling) == 1 else (0, 0)
    timed, untimed, sampled = window.timed_lookups, window.untimed_lookups, window.sampled_lookups
    # (one Lookups made, in one of four forms: dataclasses.replace costs a
    # measured cell about 5 µs, three times that on caches a model left cold)
    common = dict(
        sample_first=first,
        sample_every=every,
        waited=window.waited,
        waited_s=window.waited_s,
        waited_calls=window.waited_calls,
        calibration_s=window.overhead_s,
        timed=timed,
        untimed=untimed,
        sampled=sampled,
        calibrated=window.calibrated_lookups,
        targets=targets,
    )
    if profiled is not None:
        empty = probe.torch_version() <= probe.PROFILER_EMPTY_LOOKUPS_UNTIL
        return Lookups(
            method="profiler",
            seconds=sum(profiled),
            per_lookup_s=statistics.median(profiled) if profiled else None,
            profiled=len(profiled),
            event=probe.CACHE_LOOKUP_EVENT,
            profiler_counts_empty=empty,
            **common,
        )
    if not timed + untimed + sampled:
        return Lookups(seconds=0.0, **common)
    if not timed:
        return Lookups(**common)  # not timed: nested lookups alone, with no start to time from
    return Lookups(
        method="in situ",
        bounded=bounded,
        # each function's timed lookups stand for its counted-only ones too
        seconds=sum(t.seconds for t in targets),
        # per lookup: the median, so one lookup preempted by the OS does not move it
        per_lookup_s=_weighted_median(weighted_all),
        resumed=window.resumed_lookups,
        untimed_why=window.resume_timing_off or "",
        no_ex_calls=not probe.EX_CALLS_SEEN,
        **common,
    )


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def _call_parts(t: probe.Target, share: float | None, lookup: float | None) -> CallParts | None:
    """One function's calls, part by part: medians over its timed calls (a
    timed call that compiled is left out: its compile is the report's); the
    lookup is the lookups' own figure (``lookup``: the function's median
    lookup, bounded as ``share`` of its span where torch's profiler bounded
    it), the rest of that span the wrapper's way into Dynamo."""
    if not t.parts and not t.eager_parts:
        return None
    into = None
    if t.parts and share is not None and lookup is not None and share > 0:
        into = lookup / share - lookup
    if not t.parts:
        lookup = None
    return CallParts(
        calls=len(t.parts),
        before_s=_median([p[0] for p in t.parts if p[0] is not None]),
        into_s=into,
        lookup_s=lookup,
        compiled_s=_median([p[2] for p in t.parts]),
        after_s=_median([p[3] for p in t.parts]),
        eager_s=_eager_call(t.eager_parts),
        # every call of it that ran eagerly (the timed ones' median stands for them)
        eager_calls=t.eager_calls,
        lookup_bounded=share is not None,
        device_s=_median(t.device),
        device_calls=len(t.device),
    )


def _eager_call(parts: list[tuple[float | None, float]]) -> float | None:
    """A call that ran eagerly, whole: its wrapper before the dispatch (where
    the clock saw it) and the rest, medians."""
    rest = _median([p[1] for p in parts])
    if rest is None:
        return None
    before = _median([p[0] for p in parts if p[0] is not None])
    return rest + (before or 0.0)


def _cell_parts(targets: Sequence[LookupTarget]) -> CallParts | None:
    """Every function's parts weighed by its calls (its lookups, timed or
    counted, for the compiled ones; its eager calls for the eager part)."""
    compiled = [
        (t.parts, t.timed + t.sampled) for t in targets if t.parts is not None and t.parts.calls
    ]
    eager = [(t.parts, t.parts.eager_calls) for t in targets if t.parts and t.parts.eager_calls]
    if not compiled and not eager:
        return None
    if len(targets) == 1 and compiled and compiled[0][1]:
        # one function (the common cell): its parts are the cell's, where its
        # eager part is its calls' too (the mean of one, weighed by its calls)
        p = compiled[0][0]
        if p.eager_s is None or p.eager_calls:
            return p

    def mean(pairs: list[tuple[CallParts, int]], get: Any) -> float | None:
        known = [(get(p), w) for p, w in pairs if get(p) is not None and w]
        total = sum(w for _, w in known)
        return sum(v * w for v, w in known) / total if total else None

    return CallParts(
        calls=sum(p.calls for p, _ in compiled),
        before_s=mean(compiled, lambda p: p.before_s),
        into_s=mean(compiled, lambda p: p.into_s),
        lookup_s=mean(compiled, lambda p: p.lookup_s),
        compiled_s=mean(compiled, lambda p: p.compiled_s),
        after_s=mean(compiled, lambda p: p.after_s),
        eager_s=mean(eager, lambda p: p.eager_s),
        eager_calls=sum(p.eager_calls for p, _ in eager),
        lookup_bounded=bool(compiled) and all(p.lookup_bounded for p, _ in compiled),
        device_s=mean(compiled, lambda p: p.device_s),
        device_calls=sum(p.device_calls for p, _ in compiled),
    )
