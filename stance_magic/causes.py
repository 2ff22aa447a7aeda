"""Why a frame recompiled, in the notebook's terms: the recompile traps.

torch says *which* guard failed (``___check_obj_id(G['Block'], …)``,
``lr == 0.1``, ``tensor 'x' size mismatch …``); this module says what the
user did to make it fail and what to do about it, one line each. It reads
torch's guard text only (plus where the object a failed identity guard names
now was defined, which the probe reads from the frame), so it has no torch
import; the wording is read by :mod:`stance_magic.probe.messages` (the
guard's entry, tensor, sizes, names), and this module makes the words from
what it returns. A failure it does not recognise gives no cause: the report
then shows torch's text alone, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import probe

#: Kinds a tensor can change in that each need a graph of their own.
OWN_GRAPH = ("rank", "dtype", "device", "requires_grad", "grad mode")


def failure_kind(reason: str) -> str:
    """What a failed guard is about, from torch's text: ``size``, ``rank``,
    ``dtype``, ``device``, ``requires_grad``, ``grad mode``, ``value`` (a
    Python number), ``flag`` (a bool), ``identity``, ``attribute``,
    ``backend`` (no guard failed: the entry was made for another backend or
    callback), else ``other``."""
    if probe.names_another_backend(reason) or probe.names_no_guard(reason):
        return "backend"
    mismatch = probe.tensor_mismatch(reason)
    if mismatch is not None:
        return mismatch
    text = reason.strip()
    if probe.guard_flag(text):
        return "flag"
    if probe.guard_value(text):
        return "value"
    if probe.identity_guard(text) is not None:
        return "identity"
    if probe.dict_guard(text):
        return "attribute"
    return "other"


def decisive(failures: list[Any], fallback: str = "") -> tuple[str, str]:
    """(kind, torch's text) of the guard failure that decides a recompile.

    torch lists the first failed guard of every cache entry. An entry that
    failed on something other than a size matched the sizes: dynamic shapes
    would leave that failure in place, so it is the one to act on.
    """
    texts = [getattr(f, "reason", f) for f in failures] or ([fallback] if fallback else [])
    if not texts:
        return "other", ""
    kinds = [(failure_kind(text), text) for text in texts]
    for kind, text in kinds:
        if kind not in ("size", "backend"):
            return kind, text
    for kind, text in kinds:
        if kind == "size":
            return kind, text
    return kinds[0]


def guarded_name(text: str) -> tuple[str, bool]:
    """(the name a guard reads, whether it is a global) from ``G['lr'] == 0.1``,
    ``L['n'] == 2`` or ``n == 2``."""
    guarded = probe.guard_value(text.strip()) or probe.guard_flag(text.strip())
    name = guarded[0] if guarded else text.strip()
    return probe.guard_name(name)


@dataclass
class Cause:
    """One recompile trap: what the notebook did, and the fix."""

    kind: str
    #: what changed: a name (``lr``, ``Block``), a tensor, the grad mode
    subject: str
    #: one line: what happened
    what: str
    #: one line: what to do
    fix: str
    #: torch's text of the failed guard it was read from
    guard: str = ""
    #: recompiles of this cell with this cause
    count: int = 1
    #: the change in a few words where torch's text gives it (``size(0) 8 → 16``,
    #: ``1 → 2``; "" otherwise)
    change: str = ""

    def __str__(self) -> str:
        n = f" ({self.count}×)" if self.count > 1 else ""
        return f"{self.what}{n}: {self.fix}"


def _size_change(size: tuple[str, str, str] | None) -> str:
    """``size(0) 8 → 16`` from a size mismatch ("" without one)."""
    return f"size({size[0]}) {size[1]} → {size[2]}" if size else ""


def _expected_actual(body: str) -> str:
    """``1 → 2`` from torch's ``expected 1, actual 2`` ("" without it)."""
    found = probe.expected_actual(body)
    return f"{found[0]} → {found[1]}" if found else ""


def identify(
    guard: str,
    defined: dict[str, tuple[str, str, str]] | None = None,
    *,
    unlinked_stance: str | None = None,
) -> Cause | None:
    """The trap behind one failed guard, or None when it is not one of them.

    ``defined`` maps an identity guard's expression to (name, where, what) of
    the object it names now: ``where`` as the report writes places
    (``In [3]``), ``what`` is ``class`` or ``function``. ``unlinked_stance``:
    the stance of the call when this torch tells its entries apart by the
    address of a callback it rebuilds for every call under it (torch 2.8,
    ``eager_then_compile``; see ``probe.delayed_callback_unlinked``).
    """
    text = guard.split("  ← ")[0].strip()
    entry, body = probe.guard_entry(text)
    kind = failure_kind(body)
    if kind == "backend":
        return _backend_cause(body, text, entry, unlinked_stance)
    if kind == "size":
        return _size_cause(body, text)
    if kind in ("rank", "dtype", "device", "requires_grad"):
        tname = probe.guard_tensor(body) or "an input"
        return Cause(
            kind,
            tname,
            f"`{tname}` changed its {kind} ({probe.mismatch_detail(body)})",
            f"each {kind} needs a graph of its own: keep it fixed if the change is not intended",
            text,
            change=_expected_actual(body),
        )
    if kind == "grad mode":
        return Cause(
            kind,
            "grad mode",
            "grad mode switched between calls (torch.no_grad() or inference_mode() around "
            "some of them)",
            "each mode has a graph of its own: call the compiled code under one mode, or "
            "compile one function per mode",
            text,
        )
    if kind in ("value", "flag"):
        return _value_cause(kind, body, text)
    if kind == "attribute":
        attr, obj = probe.dict_guard(body)  # type: ignore[misc]
        owner, _ = probe.guard_name(obj)
        return Cause(
            kind,
            f"{owner}.{attr}",
            f"the attribute `{attr}` of `{owner}` was set or removed after compiling "
            "(a config object read inside the function)",
            "compiled code read it as a constant: set it before compiling, or pass the "
            "value as an argument",
            text,
        )
    if kind == "identity":
        of_entry = f" (the entry {entry} was compiled for the one before)" if entry else ""
        return _redefined_cause(body, text, defined, of_entry)
    return None


def _backend_cause(body: str, text: str, entry: str, unlinked_stance: str | None) -> Cause:
    """No guard failed: torch 2.8's rebuilt callback, or another backend's entries."""
    if unlinked_stance and not probe.names_another_backend(body):
        return Cause(
            "callback",
            unlinked_stance,
            f"no guard failed: torch 2.8 matches cache entries under {unlinked_stance} by "
            "the address of a callback it builds anew for every call, and this call's "
            "landed elsewhere in memory (a torch 2.8 defect: whether it recompiles depends "
            "on the allocator, measured or not)",
            "torch 2.9 or later links the callbacks; on 2.8 the default stance with "
            "torch.compile(dynamic=True) or mark_dynamic compiles once",
            text,
        )
    return Cause(
        "backend",
        entry or "the entry",
        "no guard failed: the cache entries were compiled for another backend (a "
        "second torch.compile of the same function or module with another backend, or "
        "force_backend), and an entry serves only the backend that made it",
        "compile each function once, with one backend (reuse the compiled object)",
        text,
    )


def _size_cause(body: str, text: str) -> Cause:
    """A size guard: a parameter's (a module of another shape through the
    shared wrapper) or an input's."""
    tname = probe.guard_tensor(body) or "an input"
    m = probe.size_mismatch(body)
    change = f"dimension {m[0]}: {m[1]} → {m[2]}" if m else body
    if probe.is_parameter(tname):
        return Cause(
            "parameter",
            tname,
            f"a parameter has another size (`{tname}`, {change}): a module of the same class "
            "with other shapes went through the same compiled code (torch compiles modules "
            "through one shared wrapper, so their entries count together)",
            "each parameter shape needs a graph of its own; torch's hint: "
            "torch._dynamo.config.force_parameter_static_shapes = False",
            text,
            change=_size_change(m),
        )
    return Cause(
        "size",
        tname,
        f"a changing size (`{tname}`, {change})",
        f"torch._dynamo.mark_dynamic({tname}, {m[0] if m else 'dim'}), "
        "%%stance eager_then_compile, or torch.compile(dynamic=True) serve every size "
        "with one graph",
        text,
        change=_size_change(m),
    )


def _value_cause(kind: str, body: str, text: str) -> Cause:
    """A value or flag guard: a global's or an argument's Python number, a
    config object's attribute, a flag."""
    name, is_global = guarded_name(body)
    if kind == "value" and is_global and "." in name:
        owner, _, attr = name.partition(".")
        value = probe.guard_value(body)[1]  # type: ignore[index]
        return Cause(
            "attribute",
            name,
            f"the attribute `{attr}` of `{owner}` changed (the entry has {name} == {value}; "
            "a config object read inside the function)",
            "compiled code read it as a constant: set it before compiling, or pass the "
            "value as an argument",
            text,
        )
    if kind == "flag":
        where = "global flag" if is_global else "flag"
        return Cause(
            kind,
            name,
            f"the {where} `{name}` changed (the entry has {probe.compared_to(body)}); torch "
            "resolved what it controls when it compiled",
            "each value has a graph of its own: fine if it changes rarely, else pass it as "
            "an argument",
            text,
        )
    value = (probe.guard_value(body) or probe.guard_flag(body))[1]  # type: ignore[index]
    number = "float" if "." in value or "e" in value else "int"
    if is_global:
        return Cause(
            kind,
            name,
            f"the global `{name}` (a Python {number}) changed; compiled code read "
            f"{name} == {value} as a constant",
            "pass it to the compiled function as a tensor, or leave it fixed while "
            "compiled code runs",
            text,
        )
    extra = ", or torch.compile(dynamic=True)" if number == "int" else ""
    return Cause(
        kind,
        name,
        f"`{name}` is a Python {number} whose value changes (a learning rate, a step "
        f"counter?); the entry has {name} == {value}",
        f"pass it as a tensor (torch.tensor({name})) so one graph serves every value{extra}",
        text,
    )


def _redefined_cause(
    body: str, text: str, defined: dict[str, tuple[str, str, str]] | None, of_entry: str
) -> Cause | None:
    """An identity guard on a class or function the notebook defined again
    (None: not one of the notebook's own)."""
    expr = probe.identity_guard(body)
    found = (defined or {}).get(expr) if expr is not None else None
    if found is None:
        return None
    name, where, thing = found
    if not where.startswith("In ["):
        return None  # not the notebook's own: no trap we can name
    return Cause(
        "redefined",
        name,
        f"`{name}` is a new {thing} since {where} (its cell ran again){of_entry}",
        f"re-create and compile the model once after editing the {thing}, or "
        "torch.compiler.reset()",
        text,
    )
