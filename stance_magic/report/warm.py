"""What a saved or loaded warm-start cache file holds (``%stance cache save``
/ ``load``, :func:`stance_magic.save_cache` / :func:`stance_magic.load_cache`):
plain data, made by :mod:`stance_magic.session.warm` and worded by
:mod:`stance_magic.render.warm`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class CacheInfo:
    """What a saved or loaded cache file holds."""

    action: str  # "saved" or "loaded"
    path: str
    torch_version: str
    #: artifacts per kind (torch's names: inductor, aot_autograd, pgo, ...), by key
    counts: dict[str, int] = field(default_factory=dict)
    #: their bytes per kind (every entry of the blob)
    kind_bytes: dict[str, int] = field(default_factory=dict)
    #: the file's size (header included)
    file_bytes: int = 0
    seconds: float = 0.0
    #: Inductor's cache directory the artifacts were loaded into (load only)
    cache_dir: str = ""
    created: str = ""
    keys: dict[str, list[str]] = field(default_factory=dict, repr=False)
    #: what the user should know about the file (a precompiled frame saved
    #: without its compiled graphs, ...), one line each
    notes: list[str] = field(default_factory=list)

    @property
    def artifacts(self) -> int:
        """torch's artifacts (not the compiled binaries stance_magic adds)."""
        return sum(n for kind, n in self.counts.items() if kind != "kernels")

    @property
    def binaries(self) -> int:
        """The compiled C++ binaries (CPU kernels, Inductor's CPU-feature checks)."""
        return self.counts.get("kernels", 0)

    @property
    def nbytes(self) -> int:
        return sum(self.kind_bytes.values())

    # The words are render's: the data class stays plain.
    def holds(self) -> str:
        """``2 Inductor FX graphs (310.2 kB), 1 AOTAutograd entry (12.0 kB)``."""
        from ..render.warm import cache_holds

        return cache_holds(self)

    def __str__(self) -> str:
        from ..render.warm import cache_info_text

        return cache_info_text(self)

    def _repr_html_(self) -> str:
        from ..render.warm import cache_info_html

        return cache_info_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
