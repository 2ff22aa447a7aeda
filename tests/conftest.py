"""Shared fixtures: a fresh, real IPython shell per test, torch left as found."""

from __future__ import annotations

import contextlib
import logging

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

import stance_magic
from stance_magic.engine import get_engine


@pytest.fixture
def shell():
    """A new InteractiveShell with stance_magic loaded and every format active."""
    InteractiveShell.clear_instance()
    c = Config()
    c.HistoryAccessor.enabled = False
    sh = InteractiveShell.instance(config=c)
    sh.display_formatter.active_types = list(sh.display_formatter.format_types)
    sh.run_cell("%load_ext stance_magic")
    yield sh
    sh.run_cell("%unload_ext stance_magic")
    torch.compiler.set_stance("default")
    torch.compiler.reset()
    get_engine().clear_history()
    InteractiveShell.clear_instance()


@pytest.fixture
def sh(shell):
    """The shell with torch and stance_magic imported in the user namespace."""
    shell.run_cell("import torch, stance_magic")
    return shell


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


def text_outputs(cap) -> list[str]:
    return [o.data.get("text/plain", "") for o in cap.outputs]


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
    "GRAPH_BREAKS_LOGGER",
    "RECOMPILES_LOGGER",
    "SHAPES_LOGGER",
    "LogMessages",
    "html_outputs",
    "last",
    "run",
    "stance_magic",
    "text_outputs",
    "torch_log",
]
