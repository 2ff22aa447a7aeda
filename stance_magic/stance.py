"""A stance: the value type, its validation and its text.

:class:`Stance` is what ``torch.compiler.set_stance`` is given;
:func:`make_stance` checks a request against the installed torch (through
:mod:`stance_magic.probe`) and :func:`stance_text` is the one notation every
view uses. No IPython and no engine here: views import this module, not the
engine.
"""

from __future__ import annotations

import difflib
import types
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from . import probe

__all__ = [
    "Stance",
    "StanceError",
    "current_stance",
    "make_stance",
    "resolve_backend",
    "stance_name_problem",
    "stance_text",
    "supported_stances",
]


class StanceError(ValueError):
    """A stance, flag or backend the user asked for is not valid.

    The message is one line, fit to show as it is; the magics turn it into
    an IPython ``UsageError``.
    """


@dataclass(frozen=True)
class Stance:
    """A compiler stance: what ``torch.compiler.set_stance`` was given.

    Examples
    --------
    >>> Stance("eager_then_compile")
    Stance(name='eager_then_compile', skip_guard_eval_unsafe=False, backend=None)
    >>> print(Stance("default", backend="eager"))
    default (backend=eager)
    """

    name: str = "default"
    skip_guard_eval_unsafe: bool = False
    backend: str | Callable[..., Any] | None = None

    @property
    def backend_name(self) -> str | None:
        """The backend as text: its name, or the callable's ``__name__``."""
        b = self.backend
        if b is None or isinstance(b, str):
            return b
        return getattr(b, "__name__", None) or type(b).__name__

    def _extras(self) -> list[str]:
        extras = []
        if self.backend is not None:
            extras.append(f"backend={self.backend_name}")
        if self.skip_guard_eval_unsafe:
            extras.append("skip_guard_eval_unsafe")
        return extras

    def __str__(self) -> str:
        extras = self._extras()
        return self.name + (f" ({', '.join(extras)})" if extras else "")

    def nested_text(self) -> str:
        """The stance as text inside parentheses of a message, as in
        ``(was: ...)``: its backend and flag follow its name after commas
        rather than in parentheses of their own.

        Examples
        --------
        >>> Stance("default", True, "eager").nested_text()
        'default, backend=eager, skip_guard_eval_unsafe'
        >>> Stance("force_eager").nested_text()
        'force_eager'
        """
        return ", ".join([self.name, *self._extras()])

    def __repr__(self) -> str:
        backend = self.backend if not callable(self.backend) else self.backend_name
        return (
            f"Stance(name={self.name!r}, skip_guard_eval_unsafe="
            f"{self.skip_guard_eval_unsafe}, backend={backend!r})"
        )

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def to_dict(self) -> dict[str, Any]:
        return {
            "stance": self.name,
            "skip_guard_eval_unsafe": self.skip_guard_eval_unsafe,
            "backend": self.backend_name,
        }


def stance_text(
    name: str, skip_guard_eval_unsafe: bool = False, backend: str | Callable[..., Any] | None = None
) -> str:
    """A stance in the one notation every view uses (``%stance``, the panel,
    the history chart): what :class:`Stance` prints.

    Examples
    --------
    >>> stance_text("default", True, "eager")
    'default (backend=eager, skip_guard_eval_unsafe)'
    """
    return str(Stance(name, skip_guard_eval_unsafe, backend))


def supported_stances() -> tuple[str, ...]:
    """Stance names the installed torch accepts.

    Examples
    --------
    >>> "force_eager" in supported_stances()
    True
    """
    return probe.supported_stances()


def _did_you_mean(word: str, options: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def resolve_backend(
    backend: str | Callable[..., Any] | None, namespace: Mapping[str, Any] | None = None
) -> str | Callable[..., Any] | None:
    """A backend name registered with torch, or a callable, checked.

    A name that torch does not register is looked up in ``namespace`` (the
    notebook's), so ``-b mybackend`` finds a function defined in a cell.
    """
    if backend is None or callable(backend):
        return backend
    if not isinstance(backend, str):
        raise StanceError(f"backend must be a name or a callable, not {type(backend).__name__}")
    names = probe.list_backends()
    if backend in names:
        problem = probe.backend_problem(backend)
        if problem:
            usable = ", ".join(probe.usable_backends())
            raise StanceError(
                f"backend {backend!r} cannot run here: {problem}; usable here: {usable}"
            )
        return backend
    # Test-only and minifier backends are valid but not worth offering.
    offered = [n for n in names if not probe.is_test_backend(n)]
    if namespace is not None and backend in namespace:
        obj: object = namespace[backend]
        if callable(obj):
            return obj
        raise StanceError(f"{backend!r} in the namespace is a {type(obj).__name__}, not a callable")
    user = sorted(
        k
        for k, v in (namespace or {}).items()
        if isinstance(v, types.FunctionType) and not k.startswith("_")
    )
    msg = (
        f"unknown backend {backend!r}{_did_you_mean(backend, offered)}"
        f"; torch has: {', '.join(offered)}"
    )
    if namespace is not None:
        msg += "; or name a callable from your namespace" + (
            f" ({', '.join(user[:8])}{', ...' if len(user) > 8 else ''})" if user else ""
        )
    raise StanceError(msg)


def stance_name_problem(name: str, commands: tuple[str, ...] = ()) -> str | None:
    """Why ``name`` is not a stance of the installed torch (one line), or None.

    A stance of a newer torch is named with the release it needs; any other
    unknown word gets a did-you-mean and the list of stances, and, where
    ``commands`` are given (the words ``%stance`` also takes in its place),
    the commands too.

    Examples
    --------
    >>> stance_name_problem("force_eager") is None
    True
    >>> stance_name_problem("force_eagr").split(";")[0]
    "unknown stance 'force_eagr' (did you mean 'force_eager'?)"
    """
    supported = supported_stances()
    if name in supported:
        return None
    hint = probe.missing_stance_hint(name)
    if hint:
        return hint
    if not commands:
        return (
            f"unknown stance {name!r}{_did_you_mean(name, supported)}"
            f"; this torch has: {', '.join(supported)}"
        )
    return (
        f"unknown stance or command {name!r}{_did_you_mean(name, (*supported, *commands))}"
        f"; this torch has: {', '.join(supported)}; commands: {', '.join(commands)}"
    )


def make_stance(
    name: str | None = None,
    skip_guard_eval_unsafe: bool = False,
    backend: str | Callable[..., Any] | None = None,
    namespace: Mapping[str, Any] | None = None,
    base: Stance | None = None,
) -> Stance:
    """Validate a stance request and return it as a :class:`Stance`.

    ``name=None`` means ``base`` (the session stance) with the given flags.
    Raises :class:`StanceError` for an unknown stance (with a did-you-mean
    and, for a stance of a newer torch, the torch it needs), a backend with
    a non-default stance, or an unknown backend.
    """
    if name is None:
        base = base or Stance()
        if (
            backend is None
            and base.backend is None
            and (not skip_guard_eval_unsafe or base.skip_guard_eval_unsafe)
            and base.name in supported_stances()
        ):
            # the base itself (a cell that names no stance): frozen, and
            # nothing about it to check again
            return base
        name = base.name
        skip_guard_eval_unsafe = skip_guard_eval_unsafe or base.skip_guard_eval_unsafe
        if backend is None:
            backend = base.backend
    problem = stance_name_problem(name)
    if problem:
        raise StanceError(problem)
    if backend is not None and name != "default":
        raise StanceError(
            f"a backend can only be forced with the 'default' stance, not {name!r} "
            "(torch: non-default stance cannot have force_backend set)"
        )
    return Stance(name, bool(skip_guard_eval_unsafe), resolve_backend(backend, namespace))


def current_stance() -> Stance:
    """The stance torch.compile is under right now.

    Examples
    --------
    >>> import stance_magic
    >>> stance_magic.current_stance()
    Stance(name='default', skip_guard_eval_unsafe=False, backend=None)
    """
    value = probe.torch_stance_value()
    last = _LAST[0]
    if last is not None and value is last[0]:
        # torch's stance value when last asked (the usual case): torch never
        # changes one (see probe.torch_stance_value), so the same Stance
        return last[2]
    raw = probe.stance_of(value)
    # an equal stance set again: the same frozen value, not a new one
    stance = last[2] if last is not None and raw == last[1] else Stance(*raw)
    _LAST[0] = (value, raw, stance)
    return stance


#: current_stance's last answer: (torch's stance value, its fields, the
#: Stance made of them); holding torch's value keeps its identity unique
_LAST: list[tuple[Any, tuple[str, bool, Any], Stance] | None] = [None]
