"""Warm starts: save this process's compile-cache artifacts to a file, load them in another.

``%stance cache save PATH`` / ``%stance cache load PATH`` (and
:func:`stance_magic.save_cache` / :func:`stance_magic.load_cache`) wrap
torch's mega-cache (``torch.compiler.save_cache_artifacts`` /
``load_cache_artifacts``, torch 2.7+): Inductor's FX graphs, AOTAutograd's
entries, automatic-dynamic (PGO) profiles, in one blob. torch's blob carries
no torch version and loads only into the torch that wrote it, so the file
has a small header of stance_magic's own in front of it::

    stance_magic compile cache\\n
    {"format": 2, "torch": "2.13.0+cpu", "sha256": "...", "blob_bytes": N,
     "kernels": [[PATH, BYTES], ...], "kernels_sha256": "...", "platform": ...}\\n
    <torch's blob><the compiled C++ binaries>

torch's blob holds the code Inductor generated, not the C++ it compiled on
a CPU: the file also carries those binaries (the kernels and Inductor's
CPU-feature checks, :func:`stance_magic.probe.caches.compiled_kernels`),
which a load writes into the cache directory where absent, on the platform
that built them and where each loads. Loading checks the header (the
format, the torch version, the sizes and the checksums) and parses the whole
blob before torch writes any artifact to its caches: a file from another
torch, a truncated or corrupt one is refused in one line
(:class:`WarmStartError`) with nothing loaded. Files of format 1 (the blob
alone) still load. Writing
goes through a temporary file and a rename (as the history exports do).

What a file holds is a :class:`~stance_magic.report.warm.CacheInfo`
(:mod:`stance_magic.report.warm`); its words, and the notes a save or a
load adds, are :mod:`stance_magic.render.warm`'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..render import warm as words
from ..report.warm import CacheInfo

if TYPE_CHECKING:
    from ..probe.caches import Artifact

MAGIC = b"stance_magic compile cache\n"
#: 2: torch's blob, then the compiled C++ kernels (header ``kernels``); 1: the blob alone
FORMAT = 2
#: header lines longer than this are not ours
_MAX_HEADER = 64 * 1024

#: keys loaded by load_cache in this process -> the file they came from
_LOADED: dict[str, str] = {}


class WarmStartError(ValueError):
    """A cache file that cannot be saved or loaded; the message is one line."""


def loaded_keys() -> dict[str, str]:
    """Artifact keys that :func:`load_cache` put into torch's caches in this
    process, each with the file it came from."""
    return _LOADED


def _counts(
    artifacts: list[Artifact],
) -> tuple[dict[str, int], dict[str, int], dict[str, list[str]]]:
    counts: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    keys: dict[str, list[str]] = {}
    for a in artifacts:
        nbytes[a.kind] = nbytes.get(a.kind, 0) + a.nbytes
        kind_keys = keys.setdefault(a.kind, [])
        if a.key not in kind_keys:  # torch keeps a recompiled entry twice
            kind_keys.append(a.key)
        counts[a.kind] = len(kind_keys)
    return counts, nbytes, keys


def _check_support() -> None:
    from ..probe import caches as probe_caches

    problem = probe_caches.mega_cache_problem()
    if problem:
        raise WarmStartError(f"cannot save or load compile caches here: {problem}")


def save_cache(path: str | os.PathLike[str]) -> CacheInfo:
    """Write this process's compile-cache artifacts to ``path``.

    What Inductor and AOTAutograd compiled (or loaded from their caches) in
    this process, as ``torch.compiler.save_cache_artifacts`` packs it, behind
    a header with the torch version and a checksum. The file is replaced
    whole or left as it was. Raises :class:`WarmStartError` when there is
    nothing to save (no Inductor compile ran: ``eager`` and ``aot_eager``
    leave no artifacts) or the path cannot be written.

    Examples
    --------
    ::

        In [5]: stance_magic.save_cache("warm.smcache")
        Out[5]: stance_magic: saved 2 compile-cache artifacts to warm.smcache (…)
    """
    from .. import paths
    from ..probe import caches as pc

    _check_support()
    t0 = time.perf_counter()
    with _BackendsMissing() as missing:
        result = pc.save_artifacts()
    if result is None:
        raise WarmStartError(
            "nothing to save: no compile in this process produced or loaded cache "
            "artifacts (they come from Inductor, torch.compile's default backend; "
            "eager and aot_eager compiles leave none)"
        )
    blob, artifacts = result
    counts, nbytes, keys = _counts(artifacts)
    kernels = pc.compiled_kernels()
    if kernels:
        counts["kernels"] = len(kernels)
        nbytes["kernels"] = sum(len(k[1]) for k in kernels)
    tail = b"".join(k[1] for k in kernels)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    torch_version = pc.torch_version_string()
    header = {
        "format": FORMAT,
        "torch": torch_version,
        "python": ".".join(str(v) for v in sys.version_info[:3]),
        "created": created,
        "blob_bytes": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "artifacts": counts,
        # precompiled frames saved without their compiled graphs (see _BackendsMissing)
        "precompile_without_graphs": missing.count,
        # the compiled C++ kernels after the blob: [path, bytes] each, in order
        "kernels": [[rel, len(b)] for rel, b in kernels],
        "kernels_sha256": hashlib.sha256(tail).hexdigest(),
        "platform": pc.kernel_platform(),
        # the CPU-feature checks among them that loaded here (Inductor's
        # marker: a process that finds it skips the check's probe)
        "load_ok": pc.load_ok_marked([rel for rel, _ in kernels]),
    }
    data = MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + blob + tail
    try:
        target = paths.atomic_write(path, data)
    except OSError as err:
        raise WarmStartError(f"cannot write {path}: {paths.reason_of(err)}") from None
    return CacheInfo(
        "saved",
        str(target),
        torch_version,
        counts,
        nbytes,
        len(data),
        time.perf_counter() - t0,
        created=created,
        keys=keys,
        notes=words.missing_graphs_note(missing.count, counts.get("precompile", 0)),
    )


class _BackendsMissing(logging.Handler):
    """Counts torch's "Backend not found" warnings while it packs its
    precompiled frames (``torch/_dynamo/package.py``): a frame saved before
    its compiled graphs existed (a training step's backward not yet run)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self._logger = logging.getLogger("torch._dynamo.package")

    def emit(self, record: logging.LogRecord) -> None:
        if "Backend not found" in record.getMessage():
            self.count += 1

    def __enter__(self) -> _BackendsMissing:
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)


def precompile(on: bool | None = None) -> str:
    """Dynamo's precompiled frames (torch's ``caching_precompile``), safe for
    notebook cells: ``on=True`` turns them on, ``False`` off, None only says.

    With them on, ``save_cache`` (``%stance cache save``) and the cache
    directory carry each compiled function's Dynamo state as well, so a new
    kernel's ``torch.compile(fn)`` of the same function skips Dynamo's
    tracing. A cell's code is fingerprinted when torch saves it and checked
    when torch looks it up: an edited cell (or an edited helper from another
    cell it calls) is traced again, never run from the old compile. Turn it
    on before ``torch.compile`` is called; a ``.py`` file's functions keep
    torch's own source check. Returns one line saying what is in force.
    Raises :class:`WarmStartError` on a torch without it (``on=True``).
    """
    from ..probe import precompile as pp

    problem = pp.available()
    if problem is not None:
        if on:
            raise WarmStartError(problem)
        return words.precompile_line(False, problem)
    if not pp.SOURCE_CHECK.install():
        if on:
            raise WarmStartError(
                "this torch's Dynamo cache is laid out otherwise: its saved frames cannot be "
                "checked against the cells' code, so precompiled frames stay off"
            )
        return words.precompile_line(False, "this torch's Dynamo cache cannot be checked")
    if on is not None:
        pp.set_enabled(on)
    return words.precompile_line(pp.enabled())


def read_cache_file(path: str | os.PathLike[str]) -> tuple[dict[str, Any], bytes]:
    """(header, torch's blob) of a cache file, checked: the format, this
    torch's version, the size and the checksum. Raises :class:`WarmStartError`."""
    header, blob, _ = _read(path)
    return header, blob


def _read(path: str | os.PathLike[str]) -> tuple[dict[str, Any], bytes, list[tuple[str, bytes]]]:
    """:func:`read_cache_file`, and the compiled kernels after the blob
    (format 2), checked as the blob is."""
    from ..probe import caches as pc

    _check_support()
    p = Path(path).expanduser()
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise WarmStartError(f"no file {p}") from None
    except IsADirectoryError:
        raise WarmStartError(f"{p} is a directory") from None
    except OSError as err:
        raise WarmStartError(f"cannot read {p}: {err.strerror or err}") from None
    if not data.startswith(MAGIC):
        raise WarmStartError(
            f"{p} is not a stance_magic cache file (no header: write one with "
            "%stance cache save, which records the torch version torch's own blob lacks)"
        )
    end = data.find(b"\n", len(MAGIC), len(MAGIC) + _MAX_HEADER)
    try:
        if end < 0:
            raise ValueError("no end of header")
        header = json.loads(data[len(MAGIC) : end])
        if not isinstance(header, dict):
            raise ValueError("not an object")
    except ValueError:
        raise WarmStartError(f"{p} is corrupt: its header cannot be read") from None
    fmt = header.get("format")
    if not isinstance(fmt, int) or fmt > FORMAT:
        raise WarmStartError(
            f"{p} has format {fmt!r}, written by a newer stance_magic (this one reads "
            f"format {FORMAT})"
        )
    here = pc.torch_version_string()
    if header.get("torch") != here:
        raise WarmStartError(
            f"{p} was saved by torch {header.get('torch')}; this is torch {here}: torch's "
            "cache artifacts load only into the torch that wrote them (nothing was loaded)"
        )
    body = data[end + 1 :]
    want = header.get("blob_bytes")
    listed = (header.get("kernels") or []) if fmt >= 2 else []
    try:
        sizes = [int(n) for _, n in listed]
        names = [str(rel) for rel, _ in listed]
    except (TypeError, ValueError):
        raise WarmStartError(f"{p} is corrupt: its header's kernel list cannot be read") from None
    if not isinstance(want, int) or want + sum(sizes) != len(body):
        raise WarmStartError(
            f"{p} is corrupt: {len(body)} bytes of artifacts where its header says "
            f"{want if not sizes else f'{want} + {sum(sizes)}'} (truncated?); nothing was loaded"
        )
    blob, tail = body[:want], body[want:]
    if hashlib.sha256(blob).hexdigest() != header.get("sha256"):
        raise WarmStartError(
            f"{p} is corrupt: its artifacts do not match the header's checksum; nothing was loaded"
        )
    if sizes and hashlib.sha256(tail).hexdigest() != header.get("kernels_sha256"):
        raise WarmStartError(
            f"{p} is corrupt: its compiled binaries do not match the header's checksum; "
            "nothing was loaded"
        )
    kernels, at = [], 0
    for rel, n in zip(names, sizes):
        kernels.append((rel, tail[at : at + n]))
        at += n
    return header, blob, kernels


def load_cache(path: str | os.PathLike[str]) -> CacheInfo:
    """Put the artifacts of a file from :func:`save_cache` into torch's caches.

    They land in Inductor's cache directory (``TORCHINDUCTOR_CACHE_DIR``);
    the next compile of the same graphs loads them instead of generating
    them, and its report says so (``warm: ... loaded by %stance cache load
    from PATH``). A file from another torch version, a truncated or corrupt
    one is refused with one line (:class:`WarmStartError`) and nothing loaded.

    Examples
    --------
    ::

        In [1]: stance_magic.load_cache("warm.smcache")
        Out[1]: stance_magic: loaded 2 compile-cache artifacts from warm.smcache …
    """
    from ..probe import caches as pc

    _check_support()
    t0 = time.perf_counter()
    header, blob, kernels = _read(path)
    try:
        artifacts = pc.load_artifacts(blob)
    except pc.BadArtifacts as err:
        raise WarmStartError(
            f"{path} is corrupt: torch cannot read its artifacts ({err}); nothing was loaded"
        ) from None
    except OSError as err:
        raise WarmStartError(
            f"could not write the artifacts of {path} into Inductor's cache directory "
            f"({err.strerror or err}); some may be there already, the session is unharmed"
        ) from None
    counts, nbytes, keys = _counts(artifacts)
    shown = str(Path(path).expanduser())
    notes = []
    if kernels:
        marked = header.get("load_ok") or []
        notes += _place_kernels(
            kernels,
            str(header.get("platform", "")),
            counts,
            nbytes,
            {str(rel) for rel in marked} if isinstance(marked, list) else set(),
        )
    without = header.get("precompile_without_graphs") or 0
    if without:
        notes.append(words.loaded_without_graphs_note(without, counts.get("precompile", 0)))
    if counts.get("precompile") and not _precompile_on():
        notes.append(words.PRECOMPILE_OFF_NOTE)
    for kind_keys in keys.values():
        for k in kind_keys:
            _LOADED[k] = shown
    return CacheInfo(
        "loaded",
        shown,
        str(header.get("torch")),
        counts,
        nbytes,
        _size(path),
        time.perf_counter() - t0,
        cache_dir=pc.cache_dir(),
        created=str(header.get("created", "")),
        keys=keys,
        notes=notes,
    )


def _place_kernels(
    kernels: list[tuple[str, bytes]],
    built_on: str,
    counts: dict[str, int],
    nbytes: dict[str, int],
    load_ok: frozenset[str] | set[str] = frozenset(),
) -> list[str]:
    """Put a file's compiled C++ binaries into the cache directory where absent
    (written whole, then renamed), where this machine is the kind that built
    them and each loads (``dlopen``: one that does not is removed again);
    what the user should know.

    A CPU-feature check that loaded where it was saved (``load_ok``) and
    loads here gets Inductor's own marker of a passed probe, where this
    torch keeps one: Inductor's probe is a child process that loads the
    binary, as this function has just done in this one, and a new kernel
    would otherwise start six of them (about 0.7 s) before its first
    compile or load."""
    from .. import paths
    from ..probe import caches as pc

    here = pc.kernel_platform()
    if built_on != here:
        return [words.other_platform_note(len(kernels), built_on, here)]
    placed = present = refused = 0
    markers = bool(load_ok) and pc.load_ok_markers()
    try:
        for rel, data in kernels:
            target = pc.kernel_path(rel)
            if target is None:
                refused += 1
            elif os.path.exists(target):
                present += 1
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                paths.atomic_write(target, data)
                if pc.loads(target):
                    placed += 1
                    if markers and rel in load_ok:
                        pc.mark_load_ok(target)
                else:  # Inductor builds it as before
                    os.unlink(target)
                    refused += 1
    except OSError as err:
        raise WarmStartError(
            f"could not write the compiled binaries into Inductor's cache directory "
            f"({err.strerror or err}); the artifacts are loaded, the session is unharmed"
        ) from None
    counts["kernels"] = placed + present
    nbytes["kernels"] = sum(len(data) for _, data in kernels)
    if refused:
        return [words.binaries_refused_note(refused, len(kernels))]
    return []


def _precompile_on() -> bool:
    from ..probe import precompile as pp

    return pp.available() is None and pp.enabled()


def _size(path: str | os.PathLike[str]) -> int:
    try:
        return os.path.getsize(Path(path).expanduser())
    except OSError:  # pragma: no cover - removed since
        return 0
