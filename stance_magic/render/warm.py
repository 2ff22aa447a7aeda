"""The words of a warm-start cache file (:mod:`stance_magic.session.warm`):
what a saved or loaded :class:`~stance_magic.report.warm.CacheInfo` holds,
read by its fields, and the notes a save or a load adds."""

from __future__ import annotations

import html
from typing import Any

from ..text import fmt_bytes, fmt_s

#: torch's artifact kinds, as the summaries name them
KIND_LABELS = {
    "inductor": "Inductor FX graphs",
    "aot_autograd": "AOTAutograd entries",
    "pgo": "automatic-dynamic (PGO) profiles",
    "autotune": "autotune results",
    "precompile": "precompiled frames",
    # stance_magic's own: the C++ binaries the mega-cache leaves out (CPU
    # kernels and Inductor's CPU-feature checks)
    "kernels": "compiled C++ binaries",
}


def cache_holds(info: Any) -> str:
    """``2 Inductor FX graphs (310.2 kB), 1 AOTAutograd entry (12.0 kB)``."""
    parts = []
    for kind, n in info.counts.items():
        label = KIND_LABELS.get(kind, kind)
        if n == 1 and label.endswith("s"):
            label = label[:-1].replace("entrie", "entry").replace("binarie", "binary")
        parts.append(f"{n} {label} ({fmt_bytes(info.kind_bytes.get(kind, 0))})")
    return ", ".join(parts)


def cache_line(info: Any) -> str:
    """The one line a save or a load prints (without its notes)."""
    n = f"{info.artifacts} compile-cache artifact{'s' if info.artifacts != 1 else ''}"
    if info.binaries:
        n += f" and {info.binaries} compiled C++ binar{'ies' if info.binaries != 1 else 'y'}"
    if info.action == "saved":
        return (
            f"stance_magic: saved {n} to {info.path} ({fmt_bytes(info.file_bytes)}, "
            f"torch {info.torch_version}, in {fmt_s(info.seconds)}): {cache_holds(info)}"
        )
    return (
        f"stance_magic: loaded {n} from {info.path} into Inductor's cache directory "
        f"{info.cache_dir} (in {fmt_s(info.seconds)}): {cache_holds(info)}; the next compile "
        "of these graphs loads them instead of generating them (code compiled before "
        "in this process stays: %stance reset to compile again)"
    )


def cache_info_text(info: Any) -> str:
    """The line, then a line per note."""
    text = cache_line(info)
    for note in info.notes:
        text += f"\nstance_magic: {note}"
    return text


def cache_info_html(info: Any) -> str:
    return (
        f'<div class="sm-notice" style="font-size:12px">{html.escape(cache_info_text(info))}</div>'
    )


def missing_graphs_note(missing: int, frames: int) -> list[str]:
    """The note for ``missing`` precompiled frames (of ``frames``) saved
    without their compiled graphs."""
    if not missing:
        return []
    return [
        f"{missing} of the {frames} precompiled frames saved lack their compiled graphs (torch: "
        '"Backend not found"): they are traced and compiled again after a load. In '
        "training, run one full step (forward and backward) before saving; an eager or "
        "aot_eager backend's graphs are never saved"
    ]


def loaded_without_graphs_note(without: int, frames: int) -> str:
    """A loaded file's precompiled frames that were saved without their graphs."""
    return (
        f"{without} of the {frames} precompiled frames in this file "
        "were saved without their compiled graphs (before a training step's backward "
        "ran, or from a backend whose graphs are not saved): torch traces and compiles "
        "them again"
    )


#: A loaded file holds precompiled frames that torch will not use.
PRECOMPILE_OFF_NOTE = (
    "the file holds precompiled frames, and torch's caching_precompile is off: "
    "%stance cache precompile on (before torch.compile) to use them"
)


def other_platform_note(count: int, built_on: str, here: str) -> str:
    """A file's compiled binaries from another kind of machine."""
    where = built_on or "another platform"
    return (
        f"the file's {count} compiled C++ binaries were built on {where}; this is "
        f"{here}: Inductor builds them again here"
    )


def binaries_refused_note(refused: int, count: int) -> str:
    """A file's compiled binaries that do not load on this machine."""
    return (
        f"{refused} of the file's {count} compiled C++ binaries do not load on this "
        "machine (a missing library?): Inductor builds them again here"
    )


def precompile_line(on: bool, why: str | None = None) -> str:
    """What ``%stance cache precompile`` says is in force (``why``: the
    reason it is off on this torch)."""
    if why is not None:
        return f"stance_magic: precompiled frames off ({why})"
    if on:
        return (
            "stance_magic: precompiled frames on (torch's caching_precompile): "
            "torch.compile calls from now on save and reuse Dynamo's traced frames; "
            "cells are checked against their saved code"
        )
    return "stance_magic: precompiled frames off (torch's caching_precompile)"
