"""One protocol for the five measuring subsystems (issue 37): the recorder,
the compile-cache watch, the CUDA-graph watch, torch's profiler and the
trace capture each start, stop and uninstall the same way, and a failure
inside one is handled by one rule (:mod:`stance_magic.probe.watch`): an
optional watch's failure is a note and its figures are missing, a required
one's closes what was opened and propagates."""

from __future__ import annotations

import pytest
import torch

import stance_magic
from stance_magic import probe
from stance_magic.builder.sharing import Sharing
from stance_magic.session.engine import get_engine

from conftest import last, run


def _five():
    return [
        get_engine().recorder,
        probe.cache_watch(),
        probe.cudagraph_watch(),
        probe.ProfilerWatch(memory=True),
        Sharing(None, None),
    ]


def test_every_subsystem_follows_the_protocol():
    names = []
    for w in _five():
        for attr in ("name", "optional", "empty", "start", "stop", "uninstall", "failure_note"):
            assert hasattr(w, attr), (type(w).__name__, attr)
        assert isinstance(w.optional, bool)
        names.append(w.name)
        assert "RuntimeError: boom" in w.failure_note(RuntimeError("boom")) or not w.optional
    assert len(set(names)) == 5
    # a block is never measured without its recorder or its trace capture
    assert [w.optional for w in _five()] == [False, True, True, True, False]


class Fake:
    """A watch that logs what is done to it and fails where told."""

    def __init__(self, name, log, optional=True, fail_start=False, fail_stop=False):
        self.name, self.optional, self.log = name, optional, log
        self.fail_start, self.fail_stop = fail_start, fail_stop
        self.empty = f"{name}:empty"

    def start(self, context=None):
        self.log.append(f"start {self.name} {context}")
        if self.fail_start:
            raise RuntimeError(f"{self.name} broke")
        return f"{self.name}:mark"

    def stop(self, mark, error=None):
        self.log.append(f"stop {self.name} {mark} {error!r}")
        if self.fail_stop:
            raise ValueError(f"{self.name} broke at stop")
        return f"{self.name}:seen"

    def uninstall(self):
        self.log.append(f"uninstall {self.name}")

    def failure_note(self, err):
        return probe.watch.default_note(self.name, err)


def test_windows_open_in_order_and_close_in_reverse():
    log = []
    watched = probe.Watched([Fake("a", log), Fake("b", log), Fake("c", log)], context="ctx")
    err = KeyError("x")
    results = watched.stop(err)
    assert log == [
        "start a ctx",
        "start b ctx",
        "start c ctx",
        "stop c c:mark KeyError('x')",
        "stop b b:mark KeyError('x')",
        "stop a a:mark KeyError('x')",
    ]
    assert results == {"a": "a:seen", "b": "b:seen", "c": "c:seen"}
    assert watched.notes == []
    # closed once
    assert watched.stop() == results and len(log) == 6


def test_an_optional_watch_that_raises_is_a_note_and_its_empty_result():
    log = []
    watched = probe.Watched(
        [
            Fake("rec", log, optional=False),
            Fake("cache", log, fail_start=True),
            Fake("cg", log, fail_stop=True),
        ]
    )
    results = watched.stop()
    assert results == {"rec": "rec:seen", "cache": "cache:empty", "cg": "cg:empty"}
    assert watched.notes == [
        "not measured (cache): RuntimeError: cache broke",
        "not measured (cg): ValueError: cg broke at stop",
    ]
    assert "stop cache" not in " ".join(log)  # it never opened


def test_a_required_watch_that_raises_closes_what_was_opened():
    log = []
    with pytest.raises(RuntimeError, match="rec broke"):
        probe.Watched(
            [Fake("share", log, optional=False), Fake("rec", log, optional=False, fail_start=True)]
        )
    assert log == ["start share None", "start rec None", "stop share share:mark None"]
    # and one that raises at its stop: the others still close, then it propagates
    log.clear()
    watched = probe.Watched([Fake("rec", log, optional=False, fail_stop=True), Fake("c", log)])
    with pytest.raises(ValueError):
        watched.stop()
    assert log[-2:] == ["stop c c:mark None", "stop rec rec:mark None"]


def test_a_broken_cache_watch_leaves_the_cell_measured_with_a_note(counting, monkeypatch):
    """torch raising inside an optional watch: the block runs, every other
    figure is there, the report says which figures are missing and why."""
    sh = counting
    cache = probe.cache_watch()

    def boom(context=None):
        raise RuntimeError("torch changed CompileEventLogger")

    monkeypatch.setattr(cache, "start", boom)
    res, _ = run(
        sh,
        "%%stance default -q\nf = torch.compile(lambda x: x.sin() + 1, backend=counting)\n"
        "y = f(torch.ones(3))",
    )
    assert res.success, res.error_in_exec
    rep = last(sh)
    assert sh.user_ns["compiled_graphs"][0] == 1
    assert rep.compiles == 1 and len(rep.frames) == 1 and rep.compiled_calls == 1
    assert (
        "not measured (torch's compile-cache events): RuntimeError: torch changed "
        "CompileEventLogger" in rep.notes
    )
    assert get_engine().recorder.open_windows == 0


def test_a_busy_profiler_keeps_its_own_words(sh):
    """Another torch profiler running: ``-m`` says so as before, the rest is measured."""
    with torch.profiler.profile():
        with stance_magic.measure(memory=True) as rep:
            torch.ones(3).sin()
    assert rep.memory == [] or not rep.memory
    assert any("not measured with the profiler: another torch profiler" in n for n in rep.notes)


def test_unload_takes_every_process_watch_out_of_torch(sh):
    """The extension's unload uninstalls every watch made so far through
    the protocol (the engine no longer looks modules up by name)."""
    from torch._dynamo.utils import CompileEventLogger

    with stance_magic.measure():
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    assert probe.cache_watch().installed  # stays between windows (see CacheWatch)
    get_engine().close()
    assert not probe.cache_watch().installed
    assert not probe.cudagraph_watch().installed
    instant = CompileEventLogger.__dict__["instant"].__func__
    assert not hasattr(instant, "_stance_magic_wraps")  # torch's own again
