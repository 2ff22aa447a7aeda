"""torch attributes the recorder replaces while a window is open, in one table.

Each :class:`Patch` names an attribute of a torch module or class, the
original found there and the replacement put in its place. :meth:`Patches.apply`
replaces them in order; :meth:`Patches.restore` puts each original back, in
reverse order, where the attribute still holds our replacement (a tool that
wrapped ours since keeps its wrapper, which calls ours, which passes
through). What is installed is what is removed: uninstalling is symmetric by
construction.

Hooks that torch sets through functions of its own (the guard-complete hook,
the recompile-user-context and compile-start callbacks, logging handlers,
``sys.monitoring``) are not attributes and stay with the recorder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Patch", "Patches"]


@dataclass
class Patch:
    """One replaced attribute: ``owner.name`` was ``original``, is ``replacement``."""

    owner: Any
    name: str
    original: Any
    replacement: Any

    @property
    def installed(self) -> bool:
        """Whether the attribute holds our replacement now."""
        return _current(self.owner, self.name) is self.replacement


class Patches:
    """The table of what is replaced while a window is open."""

    def __init__(self) -> None:
        self._applied: list[Patch] = []

    def __iter__(self) -> Any:
        return iter(self._applied)

    def __len__(self) -> int:
        return len(self._applied)

    def apply(self, owner: Any, name: str, make: Callable[[Any], Any]) -> Patch | None:
        """Replace ``owner.name`` with ``make(original)``; nothing when the
        installed torch has no such attribute (an older release). On a class,
        only an attribute the class defines itself is replaced. An attribute
        that is None (an unset hook) is replaced, and None is put back."""
        original = _current(owner, name)
        if original is _MISSING:
            return None
        patch = Patch(owner, name, original, make(original))
        setattr(owner, name, patch.replacement)
        self._applied.append(patch)
        return patch

    def original(self, owner: Any, name: str) -> Any:
        """The original of a patched attribute (None when it is not patched, or was None)."""
        for p in self._applied:
            if p.owner is owner and p.name == name:
                return p.original
        return None

    def restore(self) -> None:
        """Put every original back, last patched first, where our replacement
        is still in place."""
        for p in reversed(self._applied):
            if p.installed:
                setattr(p.owner, p.name, p.original)
        self._applied.clear()


_MISSING = object()


def _current(owner: Any, name: str) -> Any:
    if isinstance(owner, type):
        return vars(owner).get(name, _MISSING)
    return getattr(owner, name, _MISSING)
