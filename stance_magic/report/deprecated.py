"""A report's names of earlier releases: the flat names it had (``guard_s``,
``fx_cache_hits``, ``trace_file``, ...), still read through
:meth:`CellReport.__getattr__ <stance_magic.report.CellReport>` with a
``DeprecationWarning`` once each, until the next release."""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType
from typing import Any

#: Names of earlier releases, still read (with a DeprecationWarning, once
#: each) for one release: old name -> (the part it moved into, its name there).
_MOVED: dict[str, tuple[str, str]] = {
    "guard_s": ("lookups", "seconds"),
    "guard_per_call_s": ("lookups", "per_lookup_s"),
    "guard_lookups_timed": ("lookups", "timed"),
    "guard_lookups_untimed": ("lookups", "untimed"),
    "guard_lookups_sampled": ("lookups", "sampled"),
    "guard_targets": ("lookups", "targets"),
    "fullest": ("", "tightest_budget"),
    "trace_file": ("shared", "trace_file"),
    "trace_compile_ids": ("shared", "trace_compile_ids"),
    "tlparse_index": ("shared", "tlparse_index"),
    "timeline_file": ("shared", "timeline_file"),
    "fx_cache_hits": ("compile_caches", "fx_hits"),
    "fx_cache_misses": ("compile_caches", "fx_misses"),
    "fx_cache_bypasses": ("compile_caches", "fx_bypasses"),
    "aot_cache_hits": ("compile_caches", "aot_hits"),
    "aot_cache_misses": ("compile_caches", "aot_misses"),
    "aot_cache_bypasses": ("compile_caches", "aot_bypasses"),
    "cache_loaded_s": ("compile_caches", "loaded_s"),
    "cache_generated_s": ("compile_caches", "generated_s"),
    "cache_saved_s": ("compile_caches", "saved_s"),
    "cache_state": ("compile_caches", "state"),
    "cache_verdict": ("compile_caches", "verdict"),
    "cache_bypass_reasons": ("compile_caches", "bypass_reasons"),
    "cache_loaded_from": ("compile_caches", "loaded_from"),
}

#: Sentences the report kept as fields in earlier releases, made by render now.
_MOVED_TEXT = {"guard_method": "lookup_method", "guard_bound": "lookup_bound"}
#: ``7/8``, the tightest budget's entries of its limit ("" with none).
_MOVED["budget_text"] = ("", "_budget_used")

_WARNED: set[str] = set()


def _deprecated(old: str, new: str) -> None:
    """Warn once a process that ``old`` is now ``new``."""
    warn_once(f"CellReport.{old}", f".{new}")


def warn_once(old: str, new: str, what: str = "") -> None:
    """A ``DeprecationWarning``, once a process, that ``old`` goes in the
    next release and ``new`` is its name now; pointing at the user's line."""
    if old in _WARNED:
        return
    _WARNED.add(old)
    it = f"{what} {old}".strip()
    warnings.warn(
        f"{it} is deprecated and goes in the next release: read {new}",
        DeprecationWarning,
        stacklevel=_outside_the_package(),
    )


def _outside_the_package() -> int:
    """The stack level of the first frame outside stance_magic (the user's
    line, where a warning should point), counted from the caller of
    ``warnings.warn``."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    f: FrameType | None = sys._getframe(2)
    level = 2
    while f is not None and f.f_code.co_filename.startswith(package):
        f, level = f.f_back, level + 1
    return level


def _moved(rep: Any, name: str) -> Any:
    """``rep.<name>`` for a name of an earlier release (warning once that it
    moved): what its new name gives. Any other name raises AttributeError."""
    if name in _MOVED_TEXT:
        from .. import render

        _deprecated(name, f"lookups (its words: stance_magic.render.{_MOVED_TEXT[name]})")
        return getattr(render, _MOVED_TEXT[name])(rep.lookups)
    moved = _MOVED.get(name)
    if moved is None:
        raise AttributeError(f"{type(rep).__name__!r} object has no attribute {name!r}")
    part, new = moved
    _deprecated(name, f"{part}.{new}" if part else new)
    holder = getattr(rep, part) if part else rep
    return getattr(holder, new)
