"""Share a cell with the PyTorch tools: its structured trace for ``tlparse``,
a Chrome-trace/Perfetto timeline, a bug-report bundle.

* ``%%stance --trace DIR`` (``measure(trace=DIR)``): torch's structured trace
  (what ``TORCH_TRACE`` writes) of this cell alone, in a file in DIR; when
  ``tlparse`` is installed it is run on that file and the report links its
  ``index.html``.
* ``%%stance --timeline FILE.json`` (``measure(timeline=FILE)``): the cell on
  its own wall clock as Chrome trace events (``ui.perfetto.dev``,
  ``chrome://tracing``): each compile with torch's own phases, each cache
  lookup (timed ones as spans), each graph break and each run of compiled
  code.
* ``%stance bundle PATH`` (:func:`bundle`): one zip with what a bug report
  needs, and nothing else.

No torch internals here: :mod:`stance_magic.probe.trace` holds them.
"""

from __future__ import annotations

import html
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BundleError",
    "Sharing",
    "bundle",
    "check_options",
    "run_tlparse",
    "shorten_paths",
    "timeline_events",
]

#: where the panel's "trace next cell" writes (relative: the notebook's folder)
PANEL_TRACE_DIR = "stance_traces"

#: tlparse is given this long for one cell's trace
TLPARSE_TIMEOUT_S = 300


class BundleError(ValueError):
    """A bundle cannot be made (no measured cell, a bad path); one line."""


# --------------------------------------------------------------------------
# options, checked before the cell runs
# --------------------------------------------------------------------------


def check_options(
    trace: str | os.PathLike[str] | None, timeline: str | os.PathLike[str] | None
) -> None:
    """Refuse a trace directory or timeline file that cannot be written,
    before the cell runs (a ``ValueError`` with one line)."""
    if trace is not None:
        d = Path(trace).expanduser()
        if d.exists() and not d.is_dir():
            raise ValueError(f"--trace {trace}: not a directory")
        parent = d if d.exists() else _existing_parent(d)
        if not os.access(parent, os.W_OK):
            raise ValueError(f"--trace {trace}: cannot write in {parent}")
    if timeline is not None:
        from .export import check_target

        try:
            check_target(timeline)
        except OSError as err:
            raise ValueError(f"--timeline {timeline}: {err.strerror or err}") from None


def check_cell_options(trace: str | None, timeline: str | None, args: Any) -> None:
    """``%%stance --trace/--timeline``: refused with what they cannot go with,
    or a path that cannot be written (a ``StanceError``, before the cell runs)."""
    from .stance import StanceError

    if args.compare or args.sweep is not None or args.ranks:
        raise StanceError("--trace and --timeline go with a plain %%stance cell (one run)")
    try:
        check_options(trace, timeline)
    except ValueError as err:
        raise StanceError(str(err)) from None


def bundle_command(rest: list[str], engine: Any) -> str:
    """``%stance bundle PATH``: the one line to print (a ``StanceError`` for
    a usage mistake or a path that cannot be written)."""
    from .stance import StanceError

    if len(rest) != 1:
        raise StanceError("usage: %stance bundle PATH.zip (the last measured cell)")
    if not engine.history:
        raise StanceError("%stance bundle: no measured cell yet (run a %%stance cell first)")
    try:
        return bundle(rest[0], engine.history[-1])
    except BundleError as err:
        raise StanceError(f"%stance bundle: {err}") from None


def _existing_parent(p: Path) -> Path:
    p = p.absolute()
    while not p.exists():
        p = p.parent
    return p


# --------------------------------------------------------------------------
# one cell's sharing: started by the engine's Measurement, finished with it
# --------------------------------------------------------------------------


@dataclass
class Sharing:
    """The trace and the timeline of one measured block.

    The engine starts it with the block (:meth:`start`) and hands it the
    finished report, the recorder's window and the profiler (:meth:`finish`).
    """

    trace_dir: str | None = None
    timeline: str | None = None
    #: run tlparse on the trace when it is installed
    tlparse: bool = True
    capture: Any = None
    wall0: float = 0.0
    perf0: float = 0.0

    @property
    def wants_regions(self) -> bool:
        """The timeline needs the profiler's runs of compiled code."""
        return self.timeline is not None

    def start(self) -> None:
        from .probe.trace import TraceCapture, wall_and_perf

        path = None
        if self.trace_dir is not None:
            d = Path(self.trace_dir).expanduser()
            d.mkdir(parents=True, exist_ok=True)
            fd, path = tempfile.mkstemp(
                prefix=time.strftime("stance_magic_cell_%Y%m%d-%H%M%S_"), suffix=".log", dir=d
            )
            os.close(fd)
        self.capture = TraceCapture(path, chromium=self.timeline is not None)
        self.capture.start()
        self.wall0, self.perf0 = wall_and_perf()

    def finish(self, report: Any, window: Any, t0: float, profiler: Any) -> None:
        """Stop the trace; fill the report's trace, tlparse and timeline fields.
        A failure here becomes a note: the cell's report is never lost to it."""
        result = self.capture.stop() if self.capture is not None else None
        if result is None:
            return
        try:
            self._finish(report, window, t0, profiler, result)
        except Exception as err:
            report.notes.append(f"sharing this cell failed: {type(err).__name__}: {err}")

    def _finish(self, report: Any, window: Any, t0: float, profiler: Any, result: Any) -> None:
        if result.detached:
            report.notes.append(
                "torch's logging was set up again during the cell (torch._logging.set_logs "
                "takes every handler off its trace logger): the trace stops there"
            )
        if result.process_trace:
            report.notes.append(
                f"TORCH_TRACE is set for this process ({short_file(result.process_trace)}): "
                "left alone, it records this cell too"
            )
        if result.path is not None or self.timeline is not None:
            from .probe.trace import logging_overhead_s

            overhead = logging_overhead_s(window.records)
            if overhead:
                from .text import fmt_s

                report.notes.append(
                    f"torch's structured trace was on: {fmt_s(overhead)} of the compile time "
                    "went to writing it (torch's structured_logging_overhead_s)"
                )
        if result.path is not None:
            report.trace_file = result.path
            report.trace_compile_ids = list(result.compile_ids)
            if self.tlparse:
                run = run_tlparse(result.path)
                if run.index is not None:
                    report.tlparse_index = str(run.index)
                elif run.error:
                    report.notes.append(f"tlparse: {run.error}")
        if self.timeline is not None:
            from .export import atomic_write

            regions = list(getattr(profiler, "region_events", []) or [])
            data = timeline_events(
                report,
                window,
                chromium=result.chromium_events,
                regions=regions,
                wall0=self.wall0 - (self.perf0 - t0),
                perf0=t0,
            )
            try:
                written = atomic_write(self.timeline, json.dumps(data, indent=0) + "\n")
            except OSError as err:
                report.notes.append(f"timeline not written: {err}")
            else:
                report.timeline_file = str(written)
                report.notes.append(
                    "timeline on: torch's profiler recorded every operator to time the runs "
                    "of compiled code, which slows the cell, its compiles most"
                )


# --------------------------------------------------------------------------
# tlparse
# --------------------------------------------------------------------------


@dataclass
class TlparseRun:
    out: Path | None = None
    index: Path | None = None
    error: str | None = None


def tlparse_command() -> str | None:
    """The ``tlparse`` executable: on PATH or beside this Python."""
    found = shutil.which("tlparse")
    if found:
        return found
    beside = Path(sys.executable).parent / "tlparse"
    return str(beside) if beside.exists() else None


def run_tlparse(
    log: str | os.PathLike[str], out: str | os.PathLike[str] | None = None
) -> TlparseRun:
    """Run ``tlparse LOG -o OUT --no-browser --overwrite`` (OUT: beside the
    log, its name without ``.log`` plus ``_tlparse``)."""
    exe = tlparse_command()
    if exe is None:
        return TlparseRun(error="not installed (pip install tlparse): the trace was not parsed")
    log = Path(log)
    out = Path(out) if out is not None else log.with_name(log.stem + "_tlparse")
    try:
        done = subprocess.run(
            [exe, str(log), "-o", str(out), "--no-browser", "--overwrite"],
            capture_output=True,
            text=True,
            timeout=TLPARSE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return TlparseRun(out=out, error=f"could not run: {err}")
    index = out / "index.html"
    if done.returncode != 0 or not index.exists():
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no output"]
        return TlparseRun(out=out, error=f"exited {done.returncode}: {tail[0]}")
    return TlparseRun(out=out, index=index)


# --------------------------------------------------------------------------
# the report's lines about what was shared
# --------------------------------------------------------------------------


def _shown(path: str) -> str:
    """A path as the report shows it: from the current directory (the
    notebook's folder) when it is under it, else as it is."""
    rel = _href(path)
    return rel if rel is not None else path


def share_lines(rep: Any) -> list[tuple[str, str]]:
    """(what, where) rows: the trace file, tlparse's report, the timeline."""
    rows = []
    trace = getattr(rep, "trace_file", None)
    if trace:
        ids = getattr(rep, "trace_compile_ids", None) or []
        what = f"trace ({len(ids)} compile id{'s' if len(ids) != 1 else ''})"
        rows.append((what, _shown(trace)))
    index = getattr(rep, "tlparse_index", None)
    if index:
        rows.append(("tlparse", _shown(index)))
    timeline = getattr(rep, "timeline_file", None)
    if timeline:
        rows.append(("timeline", _shown(timeline)))
    return rows


def share_text(rep: Any) -> list[str]:
    return [f"  {what}: {where}" for what, where in share_lines(rep)]


def share_html(rep: Any) -> str:
    """Rows for the report's table; tlparse's index and the timeline as links
    (a notebook opens ``file`` links relative to the notebook's folder)."""
    e = html.escape
    out = []
    for what, where in share_lines(rep):
        href = _href(where)
        value = f'<a href="{e(href)}" target="_blank">{e(where)}</a>' if href else e(where)
        if what == "timeline":
            value += " (open in ui.perfetto.dev or chrome://tracing)"
        out.append(f"<tr><th>{e(what)}</th><td>{value}</td></tr>")
    return "".join(out)


def _href(path: str) -> str | None:
    """A link a notebook can follow: relative to the current directory when
    the file is under it (Jupyter serves files from there), else None."""
    try:
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(os.getcwd()))
    except ValueError:
        return None
    if rel.startswith(".."):
        return None
    return "/".join(Path(rel).parts)


# --------------------------------------------------------------------------
# the timeline (Chrome trace event format)
# --------------------------------------------------------------------------

PID = 1
TID_CELL, TID_COMPILE, TID_PHASES, TID_LOOKUP, TID_RUN, TID_BREAK = 1, 2, 3, 4, 5, 6
_TRACKS = {
    TID_CELL: "cell",
    TID_COMPILE: "compiles (stance_magic report)",
    TID_PHASES: "compile phases (torch dynamo_timed)",
    TID_LOOKUP: "cache lookups",
    TID_RUN: "compiled code runs (torch profiler)",
    TID_BREAK: "graph breaks",
}


def timeline_events(
    rep: Any,
    window: Any,
    *,
    chromium: list[dict[str, Any]],
    regions: list[tuple[str, float, float]],
    wall0: float,
    perf0: float,
) -> dict[str, Any]:
    """The cell as Chrome trace events: ``ts``/``dur`` in µs from the cell's
    start (``wall0`` on ``time.time()``, ``perf0`` on ``perf_counter()``).

    * ``compile <id> <name>``: one span per compile record, its duration the
      report's (so the spans sum to the report's compile time), placed where
      torch's ``entire_frame_compile`` began; args hold the report's phases;
    * torch's own ``dynamo_timed`` phases (``chromium_event`` records of the
      structured trace), paired begin/end, on their own track;
    * ``cache lookup``: the lookups timed in situ as spans, the others as
      instants (the recorder's clock);
    * ``graph break``: an instant when torch logged it;
    * ``run <id>``: each run of compiled code (the profiler's
      ``Torch-Compiled Region`` events, placed on the cell's clock through
      two anchor ranges the profiler recorded beside them: see
      ``probe.profiler.ANCHOR_EVENT``).
    """
    us0 = wall0 * 1e6
    ev: list[dict[str, Any]] = []
    name = f"cell {_cell_name(rep)} ({rep.stance_label})"
    ev.append(_meta("process_name", 0, {"name": f"stance_magic {name}"}))
    for tid, track in _TRACKS.items():
        ev.append(_meta("thread_name", tid, {"name": track}))
        ev.append(_meta("thread_sort_index", tid, {"sort_index": tid}))
    ev.append(_x(name, "cell", TID_CELL, 0.0, rep.wall_s * 1e6, {"source": rep.source}))

    # torch's phases: begin/end pairs per (compile id, name)
    starts: dict[tuple[str, str], list[float]] = {}
    frame_start: dict[str, float] = {}
    for c in chromium:
        ph, nm, ts = c.get("ph"), c.get("name"), c.get("ts")
        args = c.get("args") or {}
        cid = str(args.get("compile_id", ""))
        if not isinstance(ts, (int, float)) or not nm:
            continue
        key = (cid, nm)
        if ph == "B":
            starts.setdefault(key, []).append(ts - us0)
            if nm == "entire_frame_compile" and cid not in frame_start:
                frame_start[cid] = ts - us0
        elif ph == "E" and starts.get(key):
            begin = starts[key].pop()
            ev.append(
                _x(nm, "dynamo_timed", TID_PHASES, begin, ts - us0 - begin, {"compile_id": cid})
            )
        elif ph == "i":
            ev.append(_i(nm, "dynamo_timed", TID_PHASES, ts - us0, {"compile_id": cid, **args}))

    record_start = {r.compile_id: r.start_time_us for r in window.compiles}
    for f in rep.frames:
        begin = frame_start.get(f.compile_id)
        if begin is None and record_start.get(f.compile_id) is not None:
            begin = record_start[f.compile_id] - us0
        if begin is None:
            continue
        args = {
            "compile_id": f.compile_id,
            "where": f.where,
            "phases_s": f.phases,
            "backend": f.backend,
            "graph": f.graph,
        }
        if f.recompile_reason:
            args["recompile_reason"] = f.recompile_reason
        if f.failed:
            args["failed"] = f.failed
        label = "compile" if f.kind == "frame" else "backward compile"
        ev.append(
            _x(
                f"{label} {f.compile_id} {f.name}",
                "compile",
                TID_COMPILE,
                begin,
                f.seconds * 1e6,
                args,
            )
        )

    for at, seconds, hit, timed, target in window.lookup_times:
        what = "hit" if hit else "miss"
        args = {"function": target, "result": what}
        if timed:
            begin = (at - seconds - perf0) * 1e6
            ev.append(
                _x(f"cache lookup ({what})", "lookup", TID_LOOKUP, begin, seconds * 1e6, args)
            )
        else:
            args["timed"] = False
            ev.append(
                _i(
                    f"cache lookup, not timed ({what})",
                    "lookup",
                    TID_LOOKUP,
                    (at - perf0) * 1e6,
                    args,
                )
            )

    for b in window.graph_breaks:
        ts = (b.time_s - wall0) * 1e6 if b.time_s is not None else 0.0
        where = f"{short_file(b.filename)}:{b.line}" if b.filename else "?"
        ev.append(
            _i(
                f"graph break {where}",
                "graph_break",
                TID_BREAK,
                ts,
                {"reason": b.reason, "compile_id": b.compile_id},
            )
        )

    for cid, start_s, dur_s in regions:
        ev.append(
            _x(
                f"run {cid}",
                "compiled_run",
                TID_RUN,
                (start_s - perf0) * 1e6,
                dur_s * 1e6,
                {"compile_id": cid},
            )
        )

    return {
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": {
            "stance_magic": _version(),
            "cell": name,
            "clock": "µs from the start of the cell",
        },
    }


def _cell_name(rep: Any) -> str:
    n = getattr(rep, "execution_count", None)
    return f"In [{n}]" if n else f"{rep.index}"


def _meta(name: str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": PID, "tid": tid, "args": args}


def _x(name: str, cat: str, tid: int, ts: float, dur: float, args: dict[str, Any]):
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": round(ts, 3),
        "dur": round(max(dur, 0.0), 3),
        "pid": PID,
        "tid": tid,
        "args": args,
    }


def _i(name: str, cat: str, tid: int, ts: float, args: dict[str, Any]):
    return {
        "name": name,
        "cat": cat,
        "ph": "i",
        "s": "t",
        "ts": round(ts, 3),
        "pid": PID,
        "tid": tid,
        "args": args,
    }


def _version() -> str:
    from . import __version__

    return __version__


# --------------------------------------------------------------------------
# paths, shortened as the report shortens them
# --------------------------------------------------------------------------


def _prefixes(extra: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(absolute prefix, what it becomes), longest first."""
    import site
    import sysconfig

    pairs: list[tuple[str, str]] = []
    for sp in [*site.getsitepackages(), site.getusersitepackages()]:
        pairs.append((sp, "site-packages"))
    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            pairs.append((p, f"python{sys.version_info[0]}.{sys.version_info[1]}"))
    for k, v in (extra or {}).items():
        pairs.append((k, v))
    pairs.append((os.getcwd(), "."))
    # other import roots (an editable install, a project's folder): module paths
    # from there, as torch writes them in its own log prefix
    for entry in sys.path:
        if entry and os.path.isabs(entry) and os.path.isdir(entry):
            pairs.append((entry, ""))
    pairs.append((sys.prefix, "<venv>"))
    pairs.append((sys.base_prefix, "<python>"))
    pairs.append((tempfile.gettempdir(), "<tmp>"))
    pairs.append((os.path.expanduser("~"), "~"))
    out: list[tuple[str, str]] = []
    seen = set()
    for p, r in pairs:
        for q in {p, os.path.realpath(p)}:
            q = q.rstrip(os.sep)
            if q and q != os.sep and q not in seen:
                seen.add(q)
                out.append((q, r))
    return sorted(out, key=lambda pr: len(pr[0]), reverse=True)


def _cell_files() -> dict[str, str]:
    """IPython's file name of each cell (``/tmp/ipykernel_…/….py``) → ``In [N]``."""
    ip = sys.modules.get("IPython")
    get = getattr(ip, "get_ipython", None) if ip is not None else None
    shell = get() if get is not None else None
    names = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    return {k: f"In [{v}]" for k, v in names.items() if isinstance(v, int) and v > 0}


def shorten_paths(text: str, extra: dict[str, str] | None = None) -> str:
    """``text`` with every absolute path shortened: a notebook cell's file as
    ``In [N]``, library files from ``site-packages/``, the standard library
    from ``pythonX.Y/``, the notebook's folder (the current directory) as
    ``.``, then the venv, the temporary directory and the home directory as
    ``<venv>``, ``<tmp>``, ``~``; a file under another import root (an
    editable install) from that root, as torch's own log prefix writes it.
    ``extra`` maps more prefixes.

    Examples
    --------
    >>> import site
    >>> shorten_paths(site.getsitepackages()[0] + "/torch/_dynamo/eval_frame.py")
    'site-packages/torch/_dynamo/eval_frame.py'
    """
    for name, cell in sorted(_cell_files().items(), key=lambda kv: len(kv[0]), reverse=True):
        text = text.replace(name, cell)
    for prefix, short in _prefixes(extra):
        text = text.replace(prefix + os.sep, short + os.sep if short else "")
        text = re.sub(re.escape(prefix) + r"(?![\w.-])", short or ".", text)
    return text


def short_file(path: str) -> str:
    return shorten_paths(path)


# --------------------------------------------------------------------------
# the bundle
# --------------------------------------------------------------------------


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
        "stance_magic": _version(),
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
    report: Any = None,
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
    from .export import atomic_write, check_target
    from .probe.trace import dynamo_config_changes

    if report is None:
        raise BundleError("no measured cell to bundle (stance_magic.bundle() takes the last)")
    target = Path(path).expanduser()
    if target.suffix.lower() != ".zip":
        raise BundleError(f"{path}: a bundle is a .zip file")
    try:
        check_target(target)  # refused before anything is gathered
    except OSError as err:
        raise BundleError(f"cannot write {path}: {err.strerror or err}") from None

    trace = getattr(report, "trace_file", None)
    extra = {str(Path(trace).parent): "trace"} if trace else {}

    def clean(text: str) -> str:
        return shorten_paths(text, extra)

    files: dict[str, str | bytes] = {}
    files["cell.py"] = report.source or ""
    files["report.txt"] = clean(str(report))
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
        f"cell {_cell_name(report)} source",
        "report (text, JSON)",
        "versions",
        f"stance and {len(changed)} changed dynamo config value{'s' if len(changed) != 1 else ''}",
    ]
    tmp = None
    if trace and Path(trace).exists():
        text = clean(_trace_referenced_strings(Path(trace).read_text(encoding="utf-8")))
        name = Path(trace).name
        files[f"trace/{name}"] = text
        ids = getattr(report, "trace_compile_ids", None) or []
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
