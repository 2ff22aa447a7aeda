"""torch's messages, read: the one place stance_magic parses torch's wording.

Guard failures (``tensor 'x' size mismatch at index 0. expected 8, actual
16``, ``___check_obj_id(G['Block'], 1234)``), graph-break messages, a
``fail_on_recompile`` refusal, a ``ConstraintViolationError``, CUDA graphs'
skip reasons and the place torch gives a specialized size are text torch
writes for people; each function here reads one of them into plain data
(names, numbers, booleans), and says which message it reads and which torch
releases word it that way. A new torch's wording is then a change here
alone: :mod:`stance_magic.causes` and :mod:`stance_magic.builder` make their
words from what these functions return and import no ``re``.

Nothing here imports torch: the text is read as text, so a report exported
by one torch reads the same in any process.
"""

from __future__ import annotations

import re

# --------------------------------------------------------------------------
# failed guards (a recompile's reason, torch's list of every entry's failure)
# --------------------------------------------------------------------------

#: A Python number torch guarded as a constant: ``n == 2``, ``G['lr'] == 0.1``.
VALUE = re.compile(r"^(?:\d+/\d+: )?(?P<name>.+?) == (?P<value>-?[\d.]+(?:e-?\d+)?)\s*$")
#: A Python bool: ``G['DEBUG'] == False``.
FLAG = re.compile(r"^(?:\d+/\d+: )?(?P<name>.+?) == (?P<value>True|False)\s*$")
#: An attribute set on or removed from a global object after compiling.
DICT = re.compile(r"___dict_contains\('(?P<attr>[^']+)', (?P<name>.+?)\.__dict__\)")
#: An identity guard: a global class or function, an argument's type.
IDENTITY = re.compile(r"___check_(?P<kind>obj|type)_id\((?P<expr>.+?), \d+\)")
#: The tensor a tensor guard names.
TENSOR = re.compile(
    r"tensor '(?P<name>.+?)' (?:size|rank|dtype|device|requires_grad|stride|dispatch)"
)
#: A module's parameter or buffer, as torch names it in a guard.
PARAMETER = re.compile(r"_(?:parameters|buffers)\[")
#: A size mismatch: the dimension and both sizes.
SIZE = re.compile(r"size mismatch at index (?P<dim>\d+)\. expected (?P<a>\d+), actual (?P<b>\d+)")
#: torch's ``expected 1, actual 2`` in a tensor guard's text.
EXPECTED = re.compile(r"expected (?P<a>[^,]+), actual (?P<b>\S+)")

#: What a tensor guard's failure is about, by torch's words (first match wins).
MISMATCHES = (
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

_ENTRY = re.compile(r"^\d+/\d+: ")
_ENTRY_ID = re.compile(r"^\d+/\d+:")
_GLOBAL = re.compile(r"^G\[['\"](?P<g>[^'\"]+)['\"]\](?P<rest>.*)$")
_LOCAL = re.compile(r"^L\[['\"](?P<l>[^'\"]+)['\"]\](?P<rest>.*)$")


def guard_entry(text: str) -> tuple[str, str]:
    """(the cache entry, the failure) of one failed guard as torch lists it.

    torch names the entry a guard failed on before the failure:
    ``0/1: tensor 'x' size mismatch at index 0. expected 8, actual 16``
    (``get_and_maybe_log_recompilation_reasons``, torch 2.8 to 2.15). The
    entry is ``0/1`` ("" without one); the failure is the text after
    ``0/1: `` (``text`` itself without it, and for a bare ``0/1:``, which
    names no failure).
    """
    body = text.split(": ", 1)[1] if _ENTRY.match(text) else text
    entry = text.split(":", 1)[0] if _ENTRY_ID.match(text) else ""
    return entry, body


def names_another_backend(text: str) -> bool:
    """Whether a failed guard is torch's ``BACKEND_MATCH failure: torch.compile
    detected different backend callables`` (torch 2.13+: the entry was compiled
    for another backend, no guard of the user's failed)."""
    return bool(BACKEND.search(text))


def names_no_guard(text: str) -> bool:
    """Whether a failed guard names nothing: ``0/1:`` alone, or nothing at all
    (torch 2.8 to 2.12 when an entry was made for another backend or callback,
    before 2.13's ``BACKEND_MATCH failure`` text)."""
    return bool(ENTRY_ONLY.match(text))


def tensor_mismatch(text: str) -> str | None:
    """What a tensor guard's failure says changed: ``rank``, ``dtype``,
    ``device``, ``requires_grad``, ``grad mode`` or ``size``; None for
    another guard.

    torch writes ``tensor 'x' size mismatch at index 0. expected 8, actual
    16`` (``rank``, ``dtype``, ``device``, ``requires_grad mismatch`` alike),
    ``GLOBAL_STATE changed: grad_mode`` for the grad mode, and ``x.size()[0]
    == 8`` for a size guarded as a value (torch 2.8 to 2.15).
    """
    for kind, pattern in MISMATCHES:
        if pattern.search(text):
            return kind
    return None


def guard_value(text: str) -> tuple[str, str] | None:
    """(name, value) of a Python number guarded as a constant: torch's ``n ==
    2``, ``G['lr'] == 0.1``, ``L['x'] == 1e-05`` (its entry, ``0/1: ``, may
    lead; torch 2.8 to 2.15); None for another guard."""
    m = VALUE.match(text)
    return (m.group("name"), m.group("value")) if m else None


def guard_flag(text: str) -> tuple[str, str] | None:
    """(name, ``True`` or ``False``) of a Python bool guarded as a constant:
    torch's ``G['DEBUG'] == False`` (its entry may lead; torch 2.8 to 2.15);
    None for another guard."""
    m = FLAG.match(text)
    return (m.group("name"), m.group("value")) if m else None


def compared_to(text: str) -> str:
    """What torch's ``name == value`` guard compares with: the text after its
    last `` == `` (``False`` from ``G['DEBUG'] == False``)."""
    return text.split(" == ")[-1]


def identity_guard(text: str) -> str | None:
    """The expression an identity guard checks: ``G['Block']`` from torch's
    ``___check_obj_id(G['Block'], 140234)``, ``L['x']`` from
    ``___check_type_id(L['x'], 9387)`` (torch 2.8 to 2.15); None for another
    guard."""
    m = IDENTITY.search(text)
    return m.group("expr") if m else None


#: a global a guard reads: ``G['helper']`` of ``G['helper'].__code__``
GLOBAL = re.compile(r"\bG\['(\w+)'\]")


def guarded_globals(text: str) -> list[str]:
    """The globals a guard's text names, in order: ``['helper']`` from
    ``___check_obj_id(G['helper'].__code__, 1401)`` or torch's "Cache line
    invalidated because G['helper'].__code__ got deallocated" (torch 2.8 to
    2.15: Dynamo inlined those functions).

    >>> guarded_globals("0/0: ___check_obj_id(G['helper'].__code__, 1401)")
    ['helper']
    """
    return GLOBAL.findall(text)


def dict_guard(text: str) -> tuple[str, str] | None:
    """(attribute, the object's expression) of torch's
    ``___dict_contains('lr', G['cfg'].__dict__)`` (an attribute set on or
    removed from an object after compiling; torch 2.8 to 2.15); None for
    another guard."""
    m = DICT.search(text)
    return (m.group("attr"), m.group("name")) if m else None


def guard_tensor(text: str) -> str | None:
    """The tensor a tensor guard names: ``x`` from torch's ``tensor 'x' size
    mismatch at index 0. …`` (``rank``, ``dtype``, ``device``,
    ``requires_grad``, ``stride``, ``dispatch`` alike; torch 2.8 to 2.15);
    None for another guard."""
    m = TENSOR.search(text)
    return m.group("name") if m else None


def is_parameter(name: str) -> bool:
    """Whether the tensor a guard names is a module's parameter or buffer:
    torch's ``L['self']._modules['fc']._parameters['weight']`` (``_buffers``
    alike; torch 2.8 to 2.15)."""
    return bool(PARAMETER.search(name))


def size_mismatch(text: str) -> tuple[str, str, str] | None:
    """(dimension, expected size, actual size) from torch's ``tensor 'x' size
    mismatch at index 0. expected 8, actual 16`` (torch 2.8 to 2.15); None
    without one."""
    m = SIZE.search(text)
    return (m.group("dim"), m.group("a"), m.group("b")) if m else None


def expected_actual(text: str) -> tuple[str, str] | None:
    """(expected, actual) from a tensor guard's ``… mismatch. expected Float,
    actual Int`` (torch 2.8 to 2.15), stripped (the actual of its closing
    full stop); None without it."""
    m = EXPECTED.search(text)
    return (m.group("a").strip(), m.group("b").strip().rstrip(".")) if m else None


def mismatch_detail(text: str) -> str:
    """What torch says after a tensor guard's first sentence: ``expected
    Float, actual Int`` from ``tensor 'x' dtype mismatch. expected Float,
    actual Int`` (torch 2.8 to 2.15); the whole text without one."""
    return text.split(". ", 1)[-1]


def guard_name(name: str) -> tuple[str, bool]:
    """(the name as the user writes it, whether it is a global) from the
    scopes torch's guards name: ``lr`` from ``G['lr']``, ``x.shape`` from
    ``L['x'].shape`` (torch 2.8 to 2.15); other text as it is, not global."""
    g = _GLOBAL.match(name)
    if g:
        return g.group("g") + g.group("rest"), True
    loc = _LOCAL.match(name)
    if loc:
        return loc.group("l") + loc.group("rest"), False
    return name, False


# --------------------------------------------------------------------------
# dynamic shapes (torch's sources and places of a shape environment)
# --------------------------------------------------------------------------

_SCOPED = re.compile(r"\b[LG]\[['\"]([^'\"]+)['\"]\]")
_FRAME_PLACE = re.compile(r"^(?P<file>.+):(?P<line>\d+) in (?P<fn>.+)$")


def source_as_written(source: str) -> str:
    """A source as the user writes it: ``x.size()[0]`` from torch's
    ``L['x'].size()[0]`` (every ``L[…]`` and ``G[…]`` in it; torch 2.8 to
    2.15)."""
    return _SCOPED.sub(r"\1", source)


def is_module_state(source: str) -> bool:
    """Whether a shape environment's source is a module's parameter or buffer
    (``L['self']._modules['fc']._parameters['weight']``; torch 2.8 to 2.15),
    a graph input that is not the user's."""
    return "._parameters[" in source or "._buffers[" in source


def specialization_site(loc: str) -> tuple[str, str, tuple[str, int, str] | None]:
    """(code, place, (file, line, function) or None) of where torch
    specialized a size.

    torch's shape environment keeps the user's line as ``format_frame(…,
    line=True)`` writes it: ``n = x.size(0) * 2  # /tmp/ipykernel/1.py:3 in
    f`` (torch 2.8 to 2.15). The code is the text before ``  # ``, the place
    the text after it; the place read into its parts when it is ``file:line
    in function``.
    """
    code, _, at = loc.partition("  # ")
    m = _FRAME_PLACE.match(at.strip())
    parts = (m.group("file"), int(m.group("line")), m.group("fn")) if m else None
    return code, at, parts


# --------------------------------------------------------------------------
# graph breaks, refusals, errors, CUDA graphs
# --------------------------------------------------------------------------


def graph_break_field(reason: str, label: str) -> str:
    """The text after ``label`` on the first line of a graph-break message
    that starts with it: torch's ``  Explanation: Dynamo does not know how to
    trace the builtin …`` (``format_graph_break_message``, torch 2.8 to 2.15); ""
    without one (torch's older, one-line messages)."""
    for line in reason.splitlines():
        line = line.strip()
        if line.startswith(label):
            return line[len(label) :].strip()
    return ""


def graph_break_hints(reason: str) -> list[str]:
    """The hints of a graph-break message: each ``  Hint: …`` line of torch's
    ``format_graph_break_message`` (torch 2.8 to 2.15), its text alone; none in an
    older, one-line message."""
    return [ln.strip()[5:].strip() for ln in reason.splitlines() if ln.strip().startswith("Hint:")]


def names_fail_on_recompile(text: str) -> bool:
    """Whether an error is torch's refusal under the ``fail_on_recompile``
    stance: ``Detected recompile when torch.compile stance is
    'fail_on_recompile'. filename: …`` (torch 2.8 to 2.15)."""
    return "fail_on_recompile" in text


def refused_guards(error: BaseException | None) -> list[str]:
    """The guard failures torch lists in a fail_on_recompile refusal.

    From torch 2.10 the refusal ends with every cache entry's failed guard,
    one ``- 0/0: …`` line each (``get_and_maybe_log_recompilation_reasons``
    indented by ``- ``); torch 2.8's names none (see
    ``probe.REFUSAL_GUARDS_SINCE``): then the list is empty.
    """
    if error is None:
        return []
    text = str(error)
    if not names_fail_on_recompile(text):
        return []
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("- "):
            out.append(line[2:].strip())
    return out


def constraint_detail(text: str) -> str:
    """The line of torch's ``ConstraintViolationError`` that names the
    dimension (a size marked dynamic that the code specialized): its first
    ``  - Not all values of …`` line, its leading ``- `` removed, from
    torch's ``Constraints violated (L['x'].size()[0])! For more information,
    run with TORCH_LOGS="+dynamic".`` then ``  - Not all values of
    L['x'].size()[0] = … are valid because L['x'].size()[0] was inferred to
    be equal to 8`` (one such line each; torch 2.8 to 2.15); its first line
    without one."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    detail = next((ln for ln in lines if ln.startswith("- ")), lines[0] if lines else text)
    return detail.lstrip("- ")


_FOUND_FROM = re.compile(r"\.?\s*Found from\s*:?\s*$")


def cudagraph_skip_head(reason: str) -> str:
    """Why Inductor skipped CUDA graphs, its first line without the ``Found
    from :`` that introduces the stack it prints after it: ``skipping
    cudagraphs due to mutated inputs (1 instances)`` from torch's
    ``skipping cudagraphs due to mutated inputs (1 instances). Found from :
    \\n File …`` (``Found from:`` for a mutated storage; torch 2.8 to 2.15)."""
    head = next((ln.strip() for ln in reason.splitlines() if ln.strip()), "")
    head = _FOUND_FROM.sub("", head)
    return head
