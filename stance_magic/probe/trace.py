"""torch's structured trace (what ``TORCH_TRACE`` writes), for one block.

torch's ``trace_structured`` emits only while a handler is attached to its
trace logger (``torch._logging._internal.trace_log``): :class:`TraceCapture`
attaches one for a block and takes it off afterwards, so the file it writes
holds what torch logged during that block and nothing from before it.
Another handler already there (the process's own ``TORCH_TRACE``) is left
alone: it goes on writing the process's trace.

Each line is written as torch's own handler writes it (glog prefix, JSON
metadata, tab-indented payload), so ``tlparse`` reads the file. torch interns
file names once per process (``"str"`` records, the first time a name is
seen): the file starts with every name interned before the block, so that the
names of a trace started mid-session resolve.

All torch internals used here (``trace_log``, ``TorchLogsFormatter``,
``torch._logging.structured.INTERN_TABLE``, the ``chromium_event`` records of
``dynamo_timed``) are checked for; a torch without them raises
:class:`~stance_magic.probe.TorchSupportError` naming the version.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from .version import TorchSupportError, require_torch, torch_version


def _torch() -> str:
    return ".".join(str(p) for p in torch_version())


__all__ = ["TraceCapture", "TraceResult", "process_trace_dir"]


@dataclass
class TraceResult:
    """What one block's structured trace held."""

    #: the file written, or None when only events were kept
    path: str | None = None
    #: records written (lines with a JSON header)
    records: int = 0
    #: compile ids seen in the records' headers ("0/0", "1/0", ...), in order
    compile_ids: list[str] = field(default_factory=list)
    #: torch's ``chromium_event`` payloads (``dynamo_timed`` phases; ``ts`` in µs
    #: of ``time.time_ns()``), in order
    chromium_events: list[dict[str, Any]] = field(default_factory=list)
    #: the process's own TORCH_TRACE directory when one is set (left alone)
    process_trace: str | None = None
    #: torch took the handler off during the block (``torch._logging.set_logs``
    #: clears the trace logger's handlers): the trace ends there
    detached: bool = False


def _internals() -> tuple[Any, Any, Any]:
    require_torch()
    try:
        from torch._logging import structured
        from torch._logging._internal import TorchLogsFormatter, trace_log
    except ImportError as err:  # pragma: no cover - older torch
        raise TorchSupportError(
            f"torch {_torch()} has no structured trace logger ({err}); "
            "a cell's trace cannot be captured"
        ) from err
    if not hasattr(structured, "INTERN_TABLE"):  # pragma: no cover
        raise TorchSupportError(
            f"torch {_torch()}: torch._logging.structured has no INTERN_TABLE; "
            "a cell's trace cannot be captured"
        )
    return trace_log, TorchLogsFormatter, structured


def process_trace_dir() -> str | None:
    """Where the process's own structured trace goes (``TORCH_TRACE``, set
    before torch was imported), or None when it has none."""
    try:
        from torch._logging._internal import LOG_TRACE_HANDLER, trace_log
    except ImportError:  # pragma: no cover
        return os.environ.get("TORCH_TRACE") or None
    handler = LOG_TRACE_HANDLER
    if handler is not None and handler in trace_log.handlers:
        root = getattr(handler, "root_dir", None)
        if root:
            return str(root)
    return os.environ.get("TORCH_TRACE") or None


class _Handler(logging.Handler):
    def __init__(self, capture: TraceCapture) -> None:
        super().__init__(logging.DEBUG)
        self._capture = capture

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._capture._on_record(record)
        except Exception:  # never break a compile over a trace line
            self.handleError(record)


class TraceCapture:
    """Attach a handler to torch's structured-trace logger for a block.

    ``path``: write the records there, as ``TORCH_TRACE`` would (None: keep
    nothing but the events); ``chromium``: keep torch's ``chromium_event``
    payloads (compile phases with their times) for a timeline.

    Examples
    --------
    >>> cap = TraceCapture("/tmp/cell.log")      # doctest: +SKIP
    >>> cap.start(); f(x); result = cap.stop()  # doctest: +SKIP
    >>> result.compile_ids                       # doctest: +SKIP
    ['0/0']
    """

    def __init__(self, path: str | None = None, *, chromium: bool = False) -> None:
        self.path = path
        self.chromium = chromium
        self._stream: TextIO | None = None
        self._handler: _Handler | None = None
        self._formatter: Any = None
        self._level: int | None = None
        self._lock = threading.Lock()
        self._result = TraceResult(path=path)
        self._seen_ids: set[str] = set()
        self._trace_log: Any = None

    @property
    def active(self) -> bool:
        return self._handler is not None

    def start(self) -> None:
        trace_log, formatter_cls, structured = _internals()
        self._trace_log = trace_log
        self._formatter = formatter_cls(trace=True)
        self._result.process_trace = process_trace_dir()
        if self.path is not None:
            self._stream = open(self.path, "w", encoding="utf-8")
            self._preamble(structured)
        self._handler = _Handler(self)
        if trace_log.level != logging.DEBUG:  # torch sets DEBUG at import; keep it so
            self._level = trace_log.level
            trace_log.setLevel(logging.DEBUG)
        trace_log.addHandler(self._handler)

    def stop(self) -> TraceResult:
        """Take the handler off and close the file (idempotent)."""
        handler, self._handler = self._handler, None
        log = self._trace_log
        if handler is not None and log is not None:
            self._result.detached = handler not in log.handlers
            log.removeHandler(handler)
            if self._level is not None:
                log.setLevel(self._level)
                self._level = None
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
        return self._result

    # -- writing ---------------------------------------------------------
    def _preamble(self, structured: Any) -> None:
        """What the trace of a fresh process starts with: torch's version,
        then the names torch interned before this block."""
        import torch

        version = {"pytorch_version": torch.__version__, "oss": True}
        self._write_record(
            {"artifact": {"name": "torch_version", "encoding": "json"}},
            json.dumps(version),
        )
        for name, index in sorted(structured.INTERN_TABLE.items(), key=lambda kv: kv[1]):
            self._write_record({"str": [name, index]}, None)

    def _write_record(self, metadata: dict[str, Any], payload: str | None) -> None:
        record = logging.LogRecord(self._trace_log.name, logging.DEBUG, __file__, 0, "", (), None)
        record.metadata = metadata
        record.payload = payload
        self._on_record(record, count=False)

    def _on_record(self, record: logging.LogRecord, count: bool = True) -> None:
        metadata = getattr(record, "metadata", None)
        if not isinstance(metadata, dict):
            return
        if count:
            self._result.records += 1
            if "frame_id" in metadata and "frame_compile_id" in metadata:
                cid = f"{metadata['frame_id']}/{metadata['frame_compile_id']}"
                if cid not in self._seen_ids:
                    self._seen_ids.add(cid)
                    self._result.compile_ids.append(cid)
            if self.chromium and "chromium_event" in metadata:
                payload = getattr(record, "payload", None)
                try:
                    event = json.loads(payload) if payload else None
                except ValueError:
                    event = None
                if isinstance(event, dict):
                    self._result.chromium_events.append(event)
        if self._stream is None:
            return
        line = self._formatter.format(record)
        with self._lock:
            if self._stream is not None:
                self._stream.write(line + "\n")


def wall_and_perf() -> tuple[float, float]:
    """``time.time()`` and ``perf_counter()`` read together (to put torch's
    wall-clock stamps on a block's own clock)."""
    a = time.perf_counter()
    w = time.time()
    b = time.perf_counter()
    return w, (a + b) / 2


def dynamo_config_changes() -> dict[str, Any]:
    """The ``torch._dynamo.config`` values that differ from torch's defaults
    (set in code, by ``torch._dynamo.config.patch``, or from an environment
    variable torch reads), by name."""
    require_torch()
    import torch._dynamo.config as cfg

    entries = getattr(cfg, "_config", None)
    copy = getattr(cfg, "get_config_copy", None)
    if not isinstance(entries, dict) or copy is None:  # pragma: no cover
        raise TorchSupportError(
            f"torch {_torch()}: torch._dynamo.config has no _config table; "
            "its changed values cannot be listed"
        )
    out: dict[str, Any] = {}
    for name, value in sorted(copy().items()):
        entry = entries.get(name)
        if entry is None or getattr(entry, "alias", None):
            continue
        try:
            same = value == entry.default
        except Exception:
            same = False
        if not same:
            out[name] = value
    return out


def logging_overhead_s(records: list[Any]) -> float:
    """Seconds of the compile records' time that torch spent writing its
    structured trace (its own ``structured_logging_overhead_s`` figure)."""
    return float(sum(getattr(r, "structured_logging_overhead_s", 0) or 0 for r in records))
