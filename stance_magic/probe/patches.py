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

from typing import Any, Callable, NamedTuple

__all__ = ["Patch", "Patches"]


class Patch(NamedTuple):
    """One replaced attribute: ``owner.name`` was ``original``, is ``replacement``.

    (A tuple: a measured cell applies and restores the table once, so it is kept cheap.)
    """

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

    __slots__ = ("_applied",)

    def __init__(self) -> None:
        #: (owner, name, original, replacement), in the order applied
        self._applied: list[tuple[Any, str, Any, Any]] = []

    def __iter__(self) -> Any:
        return (Patch(*p) for p in self._applied)

    def __len__(self) -> int:
        return len(self._applied)

    def apply(self, owner: Any, name: str, make: Callable[[Any], Any]) -> Patch | None:
        """Replace ``owner.name`` with ``make(original)``; nothing when the
        installed torch has no such attribute (an older release). On a class,
        only an attribute the class defines itself is replaced. An attribute
        that is None (an unset hook) is replaced, and None is put back."""
        if isinstance(owner, type):
            original = owner.__dict__.get(name, _MISSING)
        else:
            original = getattr(owner, name, _MISSING)
        if original is _MISSING:
            return None
        replacement = make(original)
        setattr(owner, name, replacement)
        entry = (owner, name, original, replacement)
        self._applied.append(entry)
        return Patch(*entry)

    def replace(self, owner: Any, name: str, replacement: Any) -> bool:
        """Replace ``owner.name`` with ``replacement`` (as :meth:`apply`, for
        a replacement that does not depend on the original); False when the
        installed torch has no such attribute."""
        original = _current(owner, name)
        if original is _MISSING:
            return False
        setattr(owner, name, replacement)
        self._applied.append((owner, name, original, replacement))
        return True

    def original(self, owner: Any, name: str) -> Any:
        """The original of a patched attribute (None when it is not patched, or was None)."""
        for o, n, original, _ in self._applied:
            if o is owner and n == name:
                return original
        return None

    def restore(self) -> None:
        """Put every original back, last patched first, where our replacement
        is still in place."""
        applied = self._applied
        while applied:
            owner, name, original, replacement = applied.pop()
            if _current(owner, name) is replacement:
                setattr(owner, name, original)


_MISSING = object()


def _current(owner: Any, name: str) -> Any:
    if isinstance(owner, type):
        return vars(owner).get(name, _MISSING)
    return getattr(owner, name, _MISSING)
