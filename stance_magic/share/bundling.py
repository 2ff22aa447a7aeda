"""``%stance bundle PATH`` (:func:`bundle`): one zip with what a bug report
about a cell needs, and nothing else."""

from __future__ import annotations

import io
import json
import os
import platform
import re
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..paths import shorten_paths
from ..text import cell_label
from .trace import run_tlparse

if TYPE_CHECKING:
    from ..report import CellReport

__all__ = ["BundleError", "bundle", "versions"]


class BundleError(ValueError):
    """A bundle cannot be made (no measured cell, a bad path); one line."""


def _package_of(backend: Any) -> str:
    if backend is None or isinstance(backend, str):
        return "torch"
    mod = getattr(backend, "__module__", "") or ""
    return mod.split(".", 1)[0] or "torch"


def versions(backend: Any = None) -> dict[str, Any]:
    """torch, Python, stance_magic and the backend's package, with versions."""
    from importlib import metadata

    import torch

    pkg = _package_of(backend)
    if pkg in ("__main__", "builtins"):
        backend_pkg = {"name": "(defined in the notebook)", "version": None}
    else:
        try:
            v = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            v = None
        backend_pkg = {"name": pkg, "version": torch.__version__ if pkg == "torch" else v}
    out: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": f"{platform.system()} {platform.machine()}",
        "stance_magic": __version__,
        "backend_package": backend_pkg,
    }
    if (isinstance(backend, str) and backend == "inductor") or backend is None:
        try:
            out["triton"] = metadata.version("triton")
        except metadata.PackageNotFoundError:
            pass
    return out


def _trace_referenced_strings(text: str) -> str:
    """The trace without the interned names no record refers to (the names
    table a trace starts with is the whole process's)."""
    used = {int(m) for m in re.findall(r'"filename":\s*(\d+)', text)}
    keep = []
    for line in text.split("\n"):
        m = re.search(r'\{"str": \[.*, (\d+)\]\}$', line)
        if m and int(m.group(1)) not in used:
            continue
        keep.append(line)
    return "\n".join(keep)


def bundle(
    path: str | os.PathLike[str],
    report: CellReport | None = None,
    *,
    tlparse: bool = True,
) -> str:
    """Write one zip with what a bug report about a cell needs; return one
    line saying what is in it.

    ``report``: a :class:`~stance_magic.report.CellReport` (default: the last
    measured cell). The zip holds ``cell.py`` (the cell's source),
    ``report.txt`` and ``report.json``, ``versions.json`` (torch, Python,
    stance_magic, the backend's package), ``stance.json`` (the stance and the
    ``torch._dynamo.config`` values that differ from torch's defaults), and,
    when the cell was traced, ``trace/<file>.log`` and tlparse's output of it
    under ``tlparse/``. Nothing else: no tensor, no environment variable;
    every path is shortened (see :func:`shorten_paths`), inside the trace too.

    Examples
    --------
    >>> import stance_magic                              # doctest: +SKIP
    >>> print(stance_magic.bundle("bug.zip"))          # doctest: +SKIP
    bug.zip: cell In [4] source; report (text, JSON); versions; stance and 1 changed
    dynamo config value; trace (2 compile ids) and its tlparse output (31 files)
    """
    from ..paths import atomic_write, check_target
    from ..probe.trace import dynamo_config_changes

    if report is None:
        raise BundleError("no measured cell to bundle (stance_magic.bundle() takes the last)")
    target = Path(path).expanduser()
    if target.suffix.lower() != ".zip":
        raise BundleError(f"{path}: a bundle is a .zip file")
    try:
        check_target(target)  # refused before anything is gathered
    except OSError as err:
        raise BundleError(f"cannot write {path}: {err.strerror or err}") from None

    trace = report.shared.trace_file
    extra = {str(Path(trace).parent): "trace"} if trace else {}

    def clean(text: str) -> str:
        return shorten_paths(text, extra)

    files: dict[str, str | bytes] = {}
    files["cell.py"] = report.source or ""
    # the whole report: a bug report wants every row, none folded
    files["report.txt"] = clean(report.text(verbose=True))
    data = report.to_dict()
    data.pop("ranks", None)
    files["report.json"] = clean(json.dumps(data, indent=1, default=str) + "\n")
    backend = report.backend
    files["versions.json"] = json.dumps(versions(backend), indent=1) + "\n"
    changed = dynamo_config_changes()
    stance = {
        "stance": report.stance,
        "skip_guard_eval_unsafe": report.skip_guard_eval_unsafe,
        "backend": report.backend,
        "torch._dynamo.config (changed from its defaults)": changed,
    }
    files["stance.json"] = clean(json.dumps(stance, indent=1, default=repr) + "\n")
    said = [
        f"cell {cell_label(report) or '?'} source",
        "report (text, JSON)",
        "versions",
        f"stance and {len(changed)} changed dynamo config value{'s' if len(changed) != 1 else ''}",
    ]
    tmp = None
    if trace and Path(trace).exists():
        text = clean(_trace_referenced_strings(Path(trace).read_text(encoding="utf-8")))
        name = Path(trace).name
        files[f"trace/{name}"] = text
        ids = report.shared.trace_compile_ids
        said.append(f"trace ({len(ids)} compile id{'s' if len(ids) != 1 else ''})")
        if tlparse:
            tmp = tempfile.TemporaryDirectory(prefix="stance_magic_bundle_")
            log = Path(tmp.name) / name
            log.write_text(text, encoding="utf-8")
            run = run_tlparse(log, Path(tmp.name) / "tl_out")
            if run.index is not None:
                n = 0
                for f in sorted(run.out.rglob("*")):
                    if f.is_file():
                        rel = f.relative_to(run.out).as_posix()
                        raw = f.read_bytes()
                        try:
                            files[f"tlparse/{rel}"] = clean(raw.decode("utf-8"))
                        except UnicodeDecodeError:
                            files[f"tlparse/{rel}"] = raw
                        n += 1
                said[-1] += f" and its tlparse output ({n} files)"
            else:
                said[-1] += f" (tlparse: {run.error})"
    contents = "; ".join(said)
    files["README.txt"] = (
        "stance_magic bundle: what a torch.compile bug report needs about one cell.\n"
        f"{contents}.\nPaths are shortened (site-packages/, In [N], ., ~); no tensor and no "
        "environment variable is included.\n\nFiles:\n"
        + "".join(f"  {n}\n" for n in sorted([*files, "README.txt"]))
    )
    try:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for n in sorted(files):
                z.writestr(n, files[n])
        atomic_write(target, buf.getvalue())  # whole or not at all, as the exports
    except OSError as err:
        raise BundleError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        if tmp is not None:
            tmp.cleanup()
    return f"{target}: {contents}"
