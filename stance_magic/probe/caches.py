"""torch's compile caches: what each compile found in them, and the mega-cache.

The torch internals behind the warm-start figures, in one place (it becomes
``stance_magic/probe/caches.py`` when the probe is a package):

* per compile, torch's ``CompilationMetrics`` records count Inductor's FX
  graph cache and AOTAutograd's cache hits and misses (2.13:
  ``inductor_fx_local_cache_hit_count``, ``aotautograd_local_cache_miss_count``,
  their remote counterparts); read here with defaults, as older torches lack
  some of them;
* the key, the state (hit, miss, bypass, disabled), torch's reason for a
  bypass and the time a hit saved come from the events both caches hand to
  torch's compile event logger (``CompileEventLogger.instant``, named
  ``fx_graph_cache_<state>`` and ``autograd_cache_<state>``), caught by a
  wrapper that is in torch only while a measuring window is open;
* ``torch.compiler.save_cache_artifacts`` / ``load_cache_artifacts`` (the
  "mega-cache", torch 2.7+), with the blob parsed completely before any
  artifact is written to a cache, and torch's own warning for a bad blob (a
  traceback) kept off the console.

Nothing here imports torch at import time.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from .version import TorchSupportError, require_torch, torch_version
from .watch import default_note, faithful, held, process_watch

#: torch release that added torch.compiler.save_cache_artifacts / load_cache_artifacts
MEGA_CACHE_SINCE = (2, 7)

INDUCTOR = "inductor"
AOT_AUTOGRAD = "aot_autograd"

#: event-name prefixes -> the cache they belong to
_EVENT_PREFIXES = (("fx_graph_cache_", INDUCTOR), ("autograd_cache_", AOT_AUTOGRAD))

#: (cache, outcome) -> the CompilationMetrics fields that count it
RECORD_FIELDS = {
    (INDUCTOR, "hit"): ("inductor_fx_local_cache_hit_count", "inductor_fx_remote_cache_hit_count"),
    (INDUCTOR, "miss"): (
        "inductor_fx_local_cache_miss_count",
        "inductor_fx_remote_cache_miss_count",
    ),
    (AOT_AUTOGRAD, "hit"): (
        "aotautograd_local_cache_hit_count",
        "aotautograd_remote_cache_hit_count",
    ),
    (AOT_AUTOGRAD, "miss"): (
        "aotautograd_local_cache_miss_count",
        "aotautograd_remote_cache_miss_count",
    ),
}

#: torch's counters (``torch._dynamo.utils.counters``) for the same outcomes
COUNTERS = {
    (INDUCTOR, "hit"): ("inductor", "fxgraph_cache_hit"),
    (INDUCTOR, "miss"): ("inductor", "fxgraph_cache_miss"),
    (INDUCTOR, "bypass"): ("inductor", "fxgraph_cache_bypass"),
    (AOT_AUTOGRAD, "hit"): ("aot_autograd", "autograd_cache_hit"),
    (AOT_AUTOGRAD, "miss"): ("aot_autograd", "autograd_cache_miss"),
    (AOT_AUTOGRAD, "bypass"): ("aot_autograd", "autograd_cache_bypass"),
    (AOT_AUTOGRAD, "saved"): ("aot_autograd", "autograd_cache_saved"),
}


@dataclass
class CacheEvent:
    """One consultation of a compile cache, as torch logged it."""

    cache: str  # INDUCTOR or AOT_AUTOGRAD
    state: str  # "hit", "miss", "bypass", "disabled"
    key: str
    compile_id: str
    #: time.time_ns() when torch logged it (inside the compile)
    time_ns: int
    #: a hit: the time torch recorded for generating what it loaded
    saved_s: float | None = None
    #: a miss: the time generating took (Inductor's FX graph cache only)
    taken_s: float | None = None
    #: torch's reason for a bypass
    reason: str = ""


def record_count(rec: Any, cache: str, outcome: str) -> int:
    """Hits or misses of one cache in one CompilationMetrics record (local and
    remote), 0 where this torch's records lack the field."""
    return sum(int(getattr(rec, f, 0) or 0) for f in RECORD_FIELDS[(cache, outcome)])


def record_span_us(rec: Any) -> tuple[int, int] | None:
    """(start, end) of a record in µs since the epoch, when torch wrote them."""
    start = getattr(rec, "start_time_us", None)
    if start is None:
        return None
    end = getattr(rec, "end_time_us", None)
    if end is None:
        dur = getattr(rec, "duration_us", None)
        end = start + dur if dur is not None else None
    return (int(start), int(end)) if end is not None else None


def counters_snapshot() -> dict[tuple[str, str], int]:
    """torch's cache counters now (they only grow)."""
    from torch._dynamo.utils import counters

    return {k: int(counters[group].get(name, 0)) for k, (group, name) in COUNTERS.items()}


def _event_from(name: str, metadata: Any) -> CacheEvent | None:
    found = next(((p, c) for p, c in _EVENT_PREFIXES if name.startswith(p)), None)
    if found is None:
        return None
    prefix, cache = found
    state = name[len(prefix) :]
    meta = metadata if isinstance(metadata, dict) else {}
    saved = None
    if state == "hit":
        if meta.get("time_saved_ns") is not None:
            saved = meta["time_saved_ns"] / 1e9
        elif meta.get("time_saved_ms") is not None:
            saved = meta["time_saved_ms"] / 1e3
    taken = meta.get("time_taken_ns")
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except Exception:  # pragma: no cover - torch without compile ids
        cid = None
    return CacheEvent(
        cache=cache,
        state=state,
        key=str(meta.get("key") or ""),
        compile_id=str(cid) if cid is not None else "",
        time_ns=time.time_ns(),
        saved_s=saved,
        taken_s=taken / 1e9 if isinstance(taken, (int, float)) else None,
        reason=str(meta.get("cache_bypass_reason") or ""),
    )


class CacheWatch:
    """Collects :class:`CacheEvent` while at least one window is open.

    The wrapper around ``CompileEventLogger.instant`` is put into torch when
    the first window opens. While the loaded extension holds it (see
    :func:`stance_magic.probe.watch.hold`) it stays there, idle between
    windows, until :meth:`uninstall` (the extension's unload): swapping a
    class attribute per cell would cost every cell about 9 µs, and torch
    calls it only while it compiles; it shows as torch's own (its name,
    docstring, signature). Otherwise the last window to close takes it out.
    It passes every call on to what it replaced, and is left in place
    (passing through) if another tool wrapped it after us.
    """

    #: the watch protocol (see probe.watch): its figures are a nicety, never
    #: the block's error
    name = "caches"
    optional = True

    def __init__(self) -> None:
        self._events: list[CacheEvent] = []
        self._open = 0
        self._orig: Any = None
        self._orig_static: Any = None
        self._cls: Any = None
        self._lock = threading.Lock()
        self._generation = 0
        self.available = True

    @property
    def installed(self) -> bool:
        return self._cls is not None

    def _wrapper(self) -> Any:
        orig = self._orig
        events = self._events
        generation = self._generation

        def instant(event_name: str, metadata: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                # a wrapper left behind (another tool wrapped it after us, then
                # we reinstalled) passes through without recording twice
                if self._open and generation == self._generation and isinstance(event_name, str):
                    ev = _event_from(event_name, metadata)
                    if ev is not None:
                        events.append(ev)
            except Exception:  # pragma: no cover - never break a compile
                pass
            return orig(event_name, metadata, *args, **kwargs)

        instant._stance_magic_wraps = orig  # type: ignore[attr-defined]
        return faithful(instant, orig)

    @property
    def empty(self) -> list[CacheEvent]:
        return []

    def failure_note(self, err: BaseException) -> str:
        return default_note("torch's compile-cache events", err)

    def start(self, context: Any = None) -> int:
        """Open a window; the mark to pass to :meth:`stop`."""
        with self._lock:
            if self._cls is None and self.available:
                self._install()
            self._open += 1
        return len(self._events)

    def stop(self, mark: int, error: BaseException | None = None) -> list[CacheEvent]:
        """Close a window: the events logged since its mark."""
        events = self._events[mark:]
        with self._lock:
            self._open = max(self._open - 1, 0)
            if self._open == 0:
                self._events.clear()
                if not held():
                    self._uninstall()  # a measure() block: torch as it was
        return events

    def uninstall(self) -> None:
        """Take the wrapper out of torch (windows still open see nothing more)."""
        with self._lock:
            self._uninstall()
            self._open = 0
            self._events.clear()

    def _install(self) -> None:
        try:
            from torch._dynamo.utils import CompileEventLogger
        except ImportError:  # pragma: no cover - torch before the event logger
            self.available = False
            return
        if not isinstance(CompileEventLogger.__dict__.get("instant"), staticmethod):
            self.available = False  # pragma: no cover - torch changed it
            return
        self._cls = CompileEventLogger
        self._orig = CompileEventLogger.instant  # the plain function
        # the staticmethod itself, put back as it was (the same object)
        self._orig_static = CompileEventLogger.__dict__["instant"]
        self._generation += 1
        CompileEventLogger.instant = staticmethod(self._wrapper())

    def _uninstall(self) -> None:
        cls = self._cls
        if cls is None or self._orig is None:
            return
        now = cls.__dict__.get("instant")
        fn = getattr(now, "__func__", now)
        if getattr(fn, "_stance_magic_wraps", None) is self._orig:
            cls.instant = self._orig_static
        self._generation += 1  # a wrapper left in place records nothing more
        self._orig = None
        self._cls = None


def watch() -> CacheWatch:
    """The process's one :class:`CacheWatch`."""
    return process_watch(CacheWatch.name, CacheWatch)


def events_of(rec: Any, events: list[CacheEvent]) -> list[CacheEvent]:
    """The events logged inside one compile record: same compile id, inside
    the record's time span (a lazily compiled backward shares its forward's
    compile id, not its time)."""
    cid = str(getattr(rec, "compile_id", "") or "")
    span = record_span_us(rec)
    out = []
    for ev in events:
        if ev.compile_id and cid and ev.compile_id != cid:
            continue
        if span is not None:
            t = ev.time_ns // 1000
            if not (span[0] - 1000 <= t <= span[1] + 1000):
                continue
        out.append(ev)
    return out


# --------------------------------------------------------------------------
# Settings and the cache directory
# --------------------------------------------------------------------------


def cache_dir() -> str:
    """Inductor's cache directory (``TORCHINDUCTOR_CACHE_DIR`` or torch's default)."""
    require_torch()
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir as _cache_dir
    except ImportError:  # pragma: no cover - older layout
        from torch._inductor.utils import cache_dir as _cache_dir
    return str(_cache_dir())


def entry_path(cache: str, key: str) -> str:
    """Where torch keeps the entry of ``key`` on disk (FX graph: ``fxgraph/<key[1:3]>/<key>``;
    AOTAutograd: ``aotautograd/<key>``)."""
    import os

    root = cache_dir()
    if cache == INDUCTOR:
        return os.path.join(root, "fxgraph", key[1:3], key)
    return os.path.join(root, "aotautograd", key)


# --------------------------------------------------------------------------
# The mega-cache
# --------------------------------------------------------------------------


def mega_cache_problem() -> str | None:
    """Why this torch cannot save or load cache artifacts, or None."""
    require_torch()
    import torch

    if torch_version() < MEGA_CACHE_SINCE or not hasattr(torch.compiler, "save_cache_artifacts"):
        return (
            "torch.compiler.save_cache_artifacts / load_cache_artifacts arrived in torch "
            f"{MEGA_CACHE_SINCE[0]}.{MEGA_CACHE_SINCE[1]}; this is torch {torch.__version__}"
        )
    return None


def torch_version_string() -> str:
    import torch

    return str(torch.__version__)


@dataclass
class Artifact:
    kind: str
    key: str
    nbytes: int


def save_artifacts() -> tuple[bytes, list[Artifact]] | None:
    """torch's mega-cache blob of this process's cache artifacts and what it
    holds, or None when torch has none (no Inductor compile ran)."""
    problem = mega_cache_problem()
    if problem:
        raise TorchSupportError(problem)
    import torch

    result = torch.compiler.save_cache_artifacts()
    if result is None:
        return None
    blob = bytes(result[0])
    return blob, parse_artifacts(blob)


class BadArtifacts(ValueError):
    """torch could not read a cache-artifact blob."""


def _deserialize(blob: bytes) -> dict[str, list[Any]]:
    """Every artifact of the blob, in memory; raises :class:`BadArtifacts`."""
    try:
        from torch.compiler._cache import CacheArtifactManager, _deserialize_single_cache
        from torch.utils._appending_byte_serializer import AppendingByteSerializer
    except ImportError as err:  # pragma: no cover - torch moved them
        raise TorchSupportError(f"torch's cache-artifact reader moved: {err}") from None
    try:
        CacheArtifactManager._ensure_cache_artifacts_registered()
        pairs = AppendingByteSerializer.to_list(blob, deserialize_fn=_deserialize_single_cache)
        return dict(pairs)
    except Exception as err:
        text = str(err).strip().splitlines()
        raise BadArtifacts(f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": "))


def parse_artifacts(blob: bytes) -> list[Artifact]:
    """What a blob holds (kind, key, bytes), without writing anything."""
    return [
        Artifact(kind, a.key, len(a.content))
        for kind, items in _deserialize(blob).items()
        for a in items
    ]


def load_artifacts(blob: bytes) -> list[Artifact]:
    """Write the blob's artifacts into torch's caches (the cache directory),
    after parsing all of it: a blob torch cannot read raises
    :class:`BadArtifacts` with nothing written."""
    problem = mega_cache_problem()
    if problem:
        raise TorchSupportError(problem)
    from torch.compiler._cache import CacheArtifactManager

    artifacts = _deserialize(blob)
    CacheArtifactManager.populate_caches(artifacts)
    return [
        Artifact(kind, a.key, len(a.content)) for kind, items in artifacts.items() for a in items
    ]


# --------------------------------------------------------------------------
# Compiled C++ binaries (CPU), which the mega-cache does not hold
# --------------------------------------------------------------------------

#: Inductor's C++ code caches: each class's ``cache`` maps a kernel's key (the
#: base name of its files, ``c`` + a hash of its source and compile command)
#: to its loader (torch 2.8-2.15)
_CPP_CACHES = ("CppCodeCache", "CppPythonBindingsCodeCache", "CppWrapperCodeCache")
#: a binary, relative to the cache directory: ``<key[1:3]>/<key>[.main].so``
_BINARY_PATH = re.compile(r"^([a-z0-9]{2})/(c[a-z0-9]{20,})(\.[a-z_]+)?\.so$")
#: the largest C++ source read to tell a CPU-feature check (a few lines)
_CHECK_SOURCE_MAX = 16 * 1024


def kernel_platform() -> str:
    """What a compiled binary runs on: the OS, the processor, the C library."""
    import platform
    import sys

    libc, version = platform.libc_ver()
    return f"{sys.platform}-{platform.machine()}-{libc}{version}"


def _check_sources() -> set[str]:
    """The C++ sources of Inductor's CPU-feature checks (``VecISA.check_build``:
    it compiles each once per cache directory, seconds each, and keys the
    binary on the source, the compiler's version, the flags and torch's
    version: the same name is the same check)."""
    import sys

    isa = sys.modules.get("torch._inductor.cpu_vec_isa")
    base = getattr(isa, "VecISA", None)
    if base is None:
        return set()
    found: set[str] = set()
    todo = [base]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        for name, value in vars(cls).items():
            if name.endswith("_code") and isinstance(value, str):
                found.add(value.strip())
    return found


def compiled_kernels() -> list[tuple[str, bytes]]:
    """The C++ binaries Inductor built or loaded in this process (CPU kernels
    and C++ wrappers) and its CPU-feature checks, each as its path under
    Inductor's cache directory and its bytes. torch's mega-cache holds the
    generated source of a graph, not these: loaded into an empty cache
    directory, it has them built again (seconds each on CPU). A binary's file
    name is the hash of its source and compile command, so the same name
    means the same build."""
    import os
    import sys

    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is None:
        return []
    keys: set[str] = set()
    for name in _CPP_CACHES:
        cached = getattr(getattr(codecache, name, None), "cache", None)
        if isinstance(cached, dict):
            keys.update(k for k in cached if isinstance(k, str))
    checks = _check_sources()
    root = cache_dir()
    try:
        subdirs = sorted(d for d in os.listdir(root) if len(d) == 2)
    except OSError:
        return []
    out = []
    for sub in subdirs:
        try:
            names = sorted(os.listdir(os.path.join(root, sub)))
        except OSError:
            continue
        for name in names:
            m = _BINARY_PATH.match(f"{sub}/{name}")
            if m is None or m.group(1) != sub:
                continue
            if m.group(2) not in keys and not _is_check(root, sub, m.group(2), checks):
                continue
            try:
                with open(os.path.join(root, sub, name), "rb") as f:
                    out.append((f"{sub}/{name}", f.read()))
            except OSError:  # pragma: no cover - removed since
                continue
    return out


def _is_check(root: str, sub: str, key: str, checks: set[str]) -> bool:
    """Whether the binary ``key`` is a CPU-feature check: its source beside it."""
    import os

    if not checks:
        return False
    path = os.path.join(root, sub, f"{key}.cpp")
    try:
        if os.path.getsize(path) > _CHECK_SOURCE_MAX:
            return False
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip() in checks
    except OSError:
        return False


def kernel_path(rel: str) -> str | None:
    """Where a binary named ``rel`` (``<key[1:3]>/<key>[.main].so``, as
    :func:`compiled_kernels` gives it) lives in Inductor's cache directory;
    None for a name that is not one of Inductor's."""
    import os

    m = _BINARY_PATH.match(rel)
    if m is None or m.group(1) != m.group(2)[1:3]:
        return None
    return os.path.join(cache_dir(), *rel.split("/"))


#: what Inductor writes beside a CPU-feature check's binary once a child
#: process could load it (``VecISA.check_build``, torch 2.15): with it there,
#: a new process skips that probe (a Python process started per check, about
#: 0.1 s each)
LOAD_OK = ".load_ok"


def load_ok_markers() -> bool:
    """Whether this torch's Inductor keeps the outcome of its CPU-feature
    probes beside their binaries (a :data:`LOAD_OK` marker)."""
    try:
        import torch._inductor.cpu_vec_isa as isa
    except ImportError:  # pragma: no cover - a torch without Inductor's CPU checks
        return False
    check = getattr(getattr(isa, "VecISA", None), "check_build", None)
    return LOAD_OK in getattr(getattr(check, "__code__", None), "co_consts", ())


def load_ok_marked(rels: list[str]) -> list[str]:
    """The binaries among ``rels`` (as :func:`compiled_kernels` names them)
    that Inductor marked as loading on this machine (:data:`LOAD_OK`)."""
    import os

    return [rel for rel in rels if os.path.exists(f"{kernel_path(rel)}{LOAD_OK}")]


def mark_load_ok(path: str) -> None:
    """Mark the binary at ``path`` as loading on this machine, as Inductor
    does after its own probe (an empty :data:`LOAD_OK` file beside it)."""
    with open(path + LOAD_OK, "w"):
        pass


def loads(path: str) -> bool:
    """Whether this machine can load the shared object at ``path`` (``dlopen``)."""
    import ctypes

    try:
        ctypes.CDLL(path)
    except OSError:
        return False
    return True
