"""Shared fixtures: a fresh, real IPython shell per test, torch left as found."""

from __future__ import annotations

import atexit
import contextlib
import gc
import inspect
import logging
import os
import re
import shutil
import types
from typing import Any

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

import stance_magic
from stance_magic import probe
from stance_magic.session.engine import get_engine

#: torch's records name the user's context of a recompile (``recompile_user_contexts``)
HAS_CONTEXTS = probe.torch_version() >= probe.RECOMPILE_USER_CONTEXTS_SINCE
#: ``torch.compile(..., recompile_limit=N)``: a frame's own limit
HAS_PER_CALL_LIMIT = "recompile_limit" in inspect.signature(torch.compile).parameters


def cuda_test(fn: Any) -> Any:
    """A test that needs a CUDA device: marked ``cuda`` (``benchmarks/gpu_check.py``
    runs them, ``pytest -m cuda``) and skipped, with that reason, without one."""
    skip = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
    return pytest.mark.cuda(skip(fn))


#: ``STANCE_MAGIC_INJECT=lookup2x``: every cache-lookup figure a report is
#: built with comes out twice what it is (the total, each function's, the
#: median, a call's lookup part): a real 2x error, for the timing lane's
#: self-test (tests/test_timing_lane.py), which checks that the lane fails
#: on it. Unset, nothing is changed.
INJECT = os.environ.get("STANCE_MAGIC_INJECT", "")


@pytest.fixture(autouse=True, scope="session")
def _injected_error():
    if INJECT != "lookup2x":
        if INJECT:
            raise pytest.UsageError(f"STANCE_MAGIC_INJECT={INJECT!r}: only 'lookup2x' is known")
        yield
        return
    from stance_magic.builder import lookups

    estimate = lookups._lookup_estimate

    def doubled(t, share):
        seconds, weighted = estimate(t, share)
        return 2 * seconds, [(2 * x, w) for x, w in weighted]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lookups, "_lookup_estimate", doubled)
        yield


@pytest.fixture(autouse=True)
def _pinned_delayed_callbacks(request):
    """torch 2.8 only: one callback per torch.compile callback and stance
    under ``eager_then_compile`` / ``aot_eager_then_compile``, kept until the
    test's compiled code is gone.

    torch 2.8 builds that callback anew for every call, frees it after the
    call, and keeps a bare pointer to it in each cache entry it made; a later
    lookup compares the object at that pointer with the new callback
    (``backend_match`` in torch's ``extra_state.cpp``), reading freed memory,
    and crashes the process when the allocator has given that memory back (a
    segmentation fault, measured or not, more likely the more a process has
    run: it ended a whole matrix run). torch 2.9 links each call's callback to
    torch.compile's own, so the cache serves later calls; pinning makes 2.8
    serve them the same way and leaves nothing freed for a lookup to read. The
    report is still checked against torch's own records. A test marked
    ``unpinned_callbacks`` gets torch 2.8's callbacks as torch makes them (the
    recompiles with no failed guard that users of 2.8 see).
    """
    if (
        probe.torch_version() >= probe.DELAYED_CALLBACK_LINKED_SINCE
        or request.node.get_closest_marker("unpinned_callbacks") is not None
    ):
        yield
        return
    from torch._dynamo import eval_frame

    dispatch = eval_frame._callback_from_stance
    pinned: dict[tuple[Any, str], Any] = {}

    def pinning(callback: Any) -> Any:
        stance = eval_frame._stance.stance
        if stance not in probe.DELAYED_STANCES or callback in (None, False):
            return dispatch(callback)  # (torch passes None and False through)
        key = (callback, stance)
        if key not in pinned:
            pinned[key] = dispatch(callback)
        return pinned[key]

    eval_frame._callback_from_stance = pinning
    try:
        yield
    finally:
        if eval_frame._callback_from_stance is pinning:  # (not wrapped by a window left open)
            eval_frame._callback_from_stance = dispatch
            torch.compiler.reset()  # no cache entry points at a pinned callback now
            pinned.clear()


@pytest.fixture
def bare_shell():
    """A new InteractiveShell without the extension (unloaded after the test,
    if the test loaded it), and torch and the engine as they were."""
    InteractiveShell.clear_instance()
    c = Config()
    c.HistoryAccessor.enabled = False
    sh = InteractiveShell.instance(config=c)
    yield sh
    sh.run_cell("%unload_ext stance_magic")
    torch.compiler.set_stance("default")
    torch.compiler.reset()
    get_engine().clear_history()
    InteractiveShell.clear_instance()
    forget_shell(sh)


@pytest.fixture
def shell(bare_shell):
    """A new InteractiveShell with stance_magic loaded and every format active."""
    sh = bare_shell
    sh.display_formatter.active_types = list(sh.display_formatter.format_types)
    sh.run_cell("%load_ext stance_magic")
    return sh


def forget_shell(sh: InteractiveShell) -> None:
    """Do a test shell's exit clean-up now, without its full ``gc.collect()``.

    Each shell registers ``atexit_operations`` (a reset and a full garbage
    collection): left registered, every shell of a session stays alive with
    its namespace until exit, and then they take minutes to end. A shell
    with a history database open is left to IPython's own exit, which
    closes it."""
    history = sh.history_manager
    if history is not None and history.enabled:
        return
    atexit.unregister(sh.atexit_operations)
    for path in getattr(sh, "tempfiles", ()):  # what %edit and the like left
        path.unlink(missing_ok=True)
    for folder in getattr(sh, "tempdirs", ()):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """Shells made outside the ``shell`` fixture: their exit clean-up too."""
    for obj in gc.get_objects():
        try:
            shell = isinstance(obj, InteractiveShell)
        except ReferenceError:  # a weak proxy whose object is gone
            continue
        if shell:
            forget_shell(obj)


@pytest.fixture
def sh(shell):
    """The shell with torch and stance_magic imported in the user namespace."""
    shell.run_cell("import torch, stance_magic")
    return shell


#: A backend that counts the graphs it compiles and the runs of those graphs
#: (``compiled_graphs[0]``, ``graph_runs[0]`` in the user namespace): a source
#: of figures that does not go through stance_magic.
COUNTING_BACKEND = """
graph_runs = [0]
compiled_graphs = [0]
def counting(gm, example_inputs):
    compiled_graphs[0] += 1
    def run(*args):
        graph_runs[0] += 1
        return gm.forward(*args)
    return run
"""


@pytest.fixture
def counting(sh):
    """The shell with ``COUNTING_BACKEND`` defined in the user namespace."""
    sh.run_cell(COUNTING_BACKEND)
    return sh


def steady_timed(n: int) -> int:
    """The lookups timed of ``n`` of one function in a cell once its lookup
    is bounded for the session: the first STEADY_FIRST, a spot check
    STEADY_FIRST_SPOT calls after them, then 1 in STEADY_EVERY."""
    from stance_magic.probe.recorder.calls import STEADY_EVERY, STEADY_FIRST, STEADY_FIRST_SPOT

    first = min(n, STEADY_FIRST)
    return first + (n - first + STEADY_EVERY - STEADY_FIRST_SPOT) // STEADY_EVERY


def last(sh):
    """The last measured cell's report."""
    return sh.user_ns["stance_magic"].history()[-1]


def run(sh, code: str):
    """Run a cell as the user would and capture what they see."""
    with capture_output() as cap:
        result = sh.run_cell(code, store_history=True)
    return result, cap


def html_outputs(cap) -> list[str]:
    return [o.data["text/html"] for o in cap.outputs if "text/html" in o.data]


def has_row(text: str, label: str, value: str) -> bool:
    """Whether a text report has the row ``label`` whose value starts with
    ``value``, however wide the report pads its labels (as wide as its
    longest row's)."""
    pattern = rf"^  {re.escape(label)} +{re.escape(value)}"
    return re.search(pattern, text, re.MULTILINE) is not None


def text_outputs(cap) -> list[str]:
    return [o.data.get("text/plain", "") for o in cap.outputs]


def ui(panel: Any) -> types.SimpleNamespace:
    """A stance panel's parts as the front end has them: the widgets in its
    tree (``children``, all the way down), each by the CSS class the panel
    gives it (``sm-stance`` is ``.stance``, ``sm-report-box`` is
    ``.report``), the heading as ``.title``; the same handles the browser
    test finds them by. A class that names two widgets is an error."""
    found: dict[str, Any] = {"title": panel.children[0]}
    stack = list(panel.children)
    while stack:
        w = stack.pop()
        stack.extend(getattr(w, "children", ()))
        # ipywidgets keeps a widget's CSS classes in its synced _dom_classes trait
        for cls in getattr(w, "_dom_classes", ()):
            if not cls.startswith("sm-") or cls == "sm-quiet":
                continue
            name = cls[3:].replace("-", "_").removesuffix("_box")
            assert name not in found, f"two widgets of the panel have the class {cls}"
            found[name] = w
    return types.SimpleNamespace(**found)


@pytest.fixture(autouse=True)
def _torch_default():
    torch.compiler.set_stance("default")
    yield
    torch.compiler.set_stance("default")


class LogMessages(logging.Handler):
    """The messages of torch's own log records (what TORCH_LOGS prints)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def torch_log(logger: str, **artifacts: object):
    """``torch._logging.set_logs(**artifacts)`` with a handler on ``logger``
    (torch's artifact loggers do not propagate), reset afterwards."""
    torch._logging.set_logs(**artifacts)
    handler = LogMessages()
    lg = logging.getLogger(logger)
    lg.addHandler(handler)
    try:
        yield handler
    finally:
        lg.removeHandler(handler)
        torch._logging.set_logs()


RECOMPILES_LOGGER = "torch._dynamo.guards.__recompiles"
GRAPH_BREAKS_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"
SHAPES_LOGGER = "torch.fx.experimental.symbolic_shapes"


__all__ = [
    "COUNTING_BACKEND",
    "GRAPH_BREAKS_LOGGER",
    "HAS_CONTEXTS",
    "HAS_PER_CALL_LIMIT",
    "RECOMPILES_LOGGER",
    "SHAPES_LOGGER",
    "LogMessages",
    "html_outputs",
    "last",
    "run",
    "stance_magic",
    "text_outputs",
    "torch_log",
    "ui",
]


def forget_first_inputs() -> None:
    """Forget the first inputs eager_then_compile keeps per file and line
    (``torch._dynamo.eval_frame._EXAMPLE_INPUTS``; ``reset()`` keeps them),
    as in a fresh process. torch 2.10 keys a decorated function by its own
    wrapper's file and line, so one test's calls would make another's first
    call a second one."""
    import torch._dynamo.eval_frame as eval_frame

    if getattr(eval_frame, "_EXAMPLE_INPUTS", None) is not None:
        eval_frame._EXAMPLE_INPUTS = None
