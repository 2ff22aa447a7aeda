"""torch's compile settings in force: the values of ``torch._dynamo.config``
and ``torch._inductor.config`` that differ from their defaults.

A report keeps them (:attr:`stance_magic.report.CellReport.settings`) so
that two cells can be compared (``%stance diff``) without reading torch
again. Read from torch's own ``ConfigModule``: ``_get_dict(skip_default=True)``
(what ``codegen_config`` reads, the same in 2.8 to 2.15; an alias such as
``cache_size_limit`` is read as the setting it names, ``recompile_limit``).
torch keeps a hash of the settings in its compile-cache key (``get_hash()``,
cached until a setting changes); the others (``compile_ignored``: the
recompile limit, logging) are read one by one (27 in 2.13's Dynamo, none in
Inductor's). A cell whose settings did not change reuses the last snapshot:
1–7 µs, read only for a report that saw torch.compile.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["MODULES", "settings"]

#: The setting modules read, by the name a user types (only those already
#: imported: reading one never imports it).
MODULES = ("torch._dynamo.config", "torch._inductor.config")

#: A value's text is cut to this many characters.
WIDTH = 80

#: module -> (its fingerprint, its snapshot): reused while the fingerprint is the same
_LAST: dict[str, tuple[Any, dict[str, tuple[str, str]]]] = {}
#: module -> its compile_ignored entries
_IGNORED: dict[str, list[Any]] = {}


def _override(entry: Any) -> Any:
    """A setting's value as the user set it (a ContextVar from 2.11 or so,
    a plain attribute before)."""
    value = entry.user_override
    get = getattr(value, "get", None)
    return get() if get is not None else value


def _fingerprint(mod: Any, name: str) -> Any:
    """What changes when any setting of ``mod`` does: torch's hash of those
    in its cache key, and the user's values of the others."""
    ignored = _IGNORED.get(name)
    if ignored is None:
        keys = getattr(mod, "_compile_ignored_keys", ())
        ignored = _IGNORED[name] = [mod._config[k] for k in sorted(keys) if k in mod._config]
    return mod.get_hash(), tuple(map(_override, ignored))


def _text(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a value whose repr fails
        text = f"<{type(value).__name__}>"
    return text if len(text) <= WIDTH else text[: WIDTH - 1] + "…"


def _snapshot(mod: Any, name: str) -> dict[str, tuple[str, str]]:
    values = mod._get_dict(skip_default=True)
    entries = mod._config
    out = {}
    for key in sorted(values):
        entry = entries.get(key)
        default = entry.default if entry is not None else None
        value, default_text = _text(values[key]), _text(default)
        if value != default_text:  # an env default equal to torch's
            out[f"{name}.{key}"] = (value, default_text)
    return out


def settings() -> dict[str, tuple[str, str]]:
    """Every compile setting that differs from torch's default, by its full
    name (``torch._dynamo.config.cache_size_limit``): ``(value, default)``,
    each as its ``repr`` (cut to :data:`WIDTH`). A fresh dict each call."""
    out: dict[str, tuple[str, str]] = {}
    for name in MODULES:
        mod = sys.modules.get(name)
        if mod is None:
            continue
        try:
            key = _fingerprint(mod, name)
            last = _LAST.get(name)
            if last is None or last[0] != key:
                last = (key, _snapshot(mod, name))
                _LAST[name] = last
        except Exception:  # a torch whose config module reads otherwise
            continue
        out.update(last[1])
    return out
