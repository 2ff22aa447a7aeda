"""Why a frame recompiled, in the notebook's terms: the recompile traps.

torch says *which* guard failed (``___check_obj_id(G['Block'], …)``,
``lr == 0.1``, ``tensor 'x' size mismatch …``); this module says what the
user did to make it fail and what to do about it, one line each. It reads
torch's guard text only (plus where the object a failed identity guard names
now was defined, which the probe reads from the frame), so it has no torch
import. A failure it does not recognise gives no cause: the report then
shows torch's text alone, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: A Python number torch guarded as a constant: ``n == 2``, ``G['lr'] == 0.1``.
VALUE = re.compile(r"^(?:\d+/\d+: )?(?P<name>.+?) == (?P<value>-?[\d.]+(?:e-?\d+)?)\s*$")
#: A Python bool: ``G['DEBUG'] == False``.
FLAG = re.compile(r"^(?:\d+/\d+: )?(?P<name>.+?) == (?P<value>True|False)\s*$")
#: An attribute set on or removed from a global object after compiling.
DICT = re.compile(r"___dict_contains\('(?P<attr>[^']+)', (?P<name>.+?)\.__dict__\)")
#: An identity guard: a global class or function, an argument's type.
IDENTITY = re.compile(r"___check_(?P<kind>obj|type)_id\((?P<expr>.+?), \d+\)")
TENSOR = re.compile(
    r"tensor '(?P<name>.+?)' (?:size|rank|dtype|device|requires_grad|stride|dispatch)"
)
#: A module's parameter or buffer, as torch names it in a guard.
PARAMETER = re.compile(r"_(?:parameters|buffers)\[")
SIZE = re.compile(r"size mismatch at index (?P<dim>\d+)\. expected (?P<a>\d+), actual (?P<b>\d+)")

_KINDS = (
    ("rank", re.compile(r"rank mismatch", re.I)),
    ("dtype", re.compile(r"dtype mismatch", re.I)),
    ("device", re.compile(r"device mismatch", re.I)),
    ("requires_grad", re.compile(r"requires_grad mismatch", re.I)),
    ("grad mode", re.compile(r"grad_mode", re.I)),
    ("size", re.compile(r"size mismatch at index|size\(\)", re.I)),
)

#: torch 2.13+'s text when an entry was compiled for another backend.
BACKEND = re.compile(r"BACKEND_MATCH failure")
#: ``0/1: `` with nothing after it: no guard failed (torch before the
#: BACKEND_MATCH text: the entry was made for another callback).
ENTRY_ONLY = re.compile(r"^(?:\d+/\d+:)?\s*$")

#: Kinds a tensor can change in that each need a graph of their own.
OWN_GRAPH = ("rank", "dtype", "device", "requires_grad", "grad mode")


def failure_kind(reason: str) -> str:
    """What a failed guard is about, from torch's text: ``size``, ``rank``,
    ``dtype``, ``device``, ``requires_grad``, ``grad mode``, ``value`` (a
    Python number), ``flag`` (a bool), ``identity``, ``attribute``,
    ``backend`` (no guard failed: the entry was made for another backend or
    callback), else ``other``."""
    if BACKEND.search(reason) or ENTRY_ONLY.match(reason):
        return "backend"
    for kind, pattern in _KINDS:
        if pattern.search(reason):
            return kind
    text = reason.strip()
    if FLAG.match(text):
        return "flag"
    if VALUE.match(text):
        return "value"
    if IDENTITY.search(text):
        return "identity"
    if DICT.search(text):
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
    m = VALUE.match(text.strip()) or FLAG.match(text.strip())
    name = m.group("name") if m else text.strip()
    return _plain(name)


def _plain(name: str) -> tuple[str, bool]:
    g = re.match(r"^G\[['\"](?P<g>[^'\"]+)['\"]\](?P<rest>.*)$", name)
    if g:
        return g.group("g") + g.group("rest"), True
    loc = re.match(r"^L\[['\"](?P<l>[^'\"]+)['\"]\](?P<rest>.*)$", name)
    if loc:
        return loc.group("l") + loc.group("rest"), False
    return name, False


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


#: torch's ``expected 1, actual 2`` in a tensor guard's text.
EXPECTED = re.compile(r"expected (?P<a>[^,]+), actual (?P<b>\S+)")


def _size_change(m: re.Match[str] | None) -> str:
    """``size(0) 8 → 16`` from a size mismatch ("" without one)."""
    return f"size({m.group('dim')}) {m.group('a')} → {m.group('b')}" if m else ""


def _expected_actual(body: str) -> str:
    """``1 → 2`` from torch's ``expected 1, actual 2`` ("" without it)."""
    m = EXPECTED.search(body)
    return f"{m.group('a').strip()} → {m.group('b').strip().rstrip('.')}" if m else ""


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
    body = text.split(": ", 1)[1] if re.match(r"^\d+/\d+: ", text) else text
    entry = text.split(":", 1)[0] if re.match(r"^\d+/\d+:", text) else ""
    of_entry = f" (the entry {entry} was compiled for the one before)" if entry else ""
    kind = failure_kind(body)
    if kind == "backend" and unlinked_stance and not BACKEND.search(body):
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
    if kind == "backend":
        return Cause(
            "backend",
            entry or "the entry",
            "no guard failed: the cache entries were compiled for another backend (a "
            "second torch.compile of the same function or module with another backend, or "
            "force_backend), and an entry serves only the backend that made it",
            "compile each function once, with one backend (reuse the compiled object)",
            text,
        )
    tensor = TENSOR.search(body)
    tname = tensor.group("name") if tensor else "an input"
    if kind == "size" and PARAMETER.search(tname):
        m = SIZE.search(body)
        change = f"dimension {m.group('dim')}: {m.group('a')} → {m.group('b')}" if m else body
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
    if kind == "size":
        m = SIZE.search(body)
        change = f"dimension {m.group('dim')}: {m.group('a')} → {m.group('b')}" if m else body
        return Cause(
            kind,
            tname,
            f"a changing size (`{tname}`, {change})",
            f"torch._dynamo.mark_dynamic({tname}, {m.group('dim') if m else 'dim'}), "
            "%%stance eager_then_compile, or torch.compile(dynamic=True) serve every size "
            "with one graph",
            text,
            change=_size_change(m),
        )
    if kind in ("rank", "dtype", "device", "requires_grad"):
        return Cause(
            kind,
            tname,
            f"`{tname}` changed its {kind} ({body.split('. ', 1)[-1]})",
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
    name, is_global = guarded_name(body) if kind in ("value", "flag") else ("", False)
    if kind == "value" and is_global and "." in name:
        owner, _, attr = name.partition(".")
        value = VALUE.match(body).group("value")  # type: ignore[union-attr]
        return Cause(
            "attribute",
            name,
            f"the attribute `{attr}` of `{owner}` changed (the entry has {name} == {value}; "
            "a config object read inside the function)",
            "compiled code read it as a constant: set it before compiling, or pass the "
            "value as an argument",
            text,
        )
    if kind == "value":
        value = (VALUE.match(body) or FLAG.match(body)).group("value")  # type: ignore[union-attr]
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
    if kind == "flag":
        where = "global flag" if is_global else "flag"
        return Cause(
            kind,
            name,
            f"the {where} `{name}` changed (the entry has {body.split(' == ')[-1]}); torch "
            "resolved what it controls when it compiled",
            "each value has a graph of its own: fine if it changes rarely, else pass it as "
            "an argument",
            text,
        )
    if kind == "attribute":
        m = DICT.search(body)
        owner, _ = _plain(m.group("name"))  # type: ignore[union-attr]
        attr = m.group("attr")  # type: ignore[union-attr]
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
        m = IDENTITY.search(body)
        expr = m.group("expr")  # type: ignore[union-attr]
        found = (defined or {}).get(expr)
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
    return None
