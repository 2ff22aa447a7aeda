"""The %stance / %%stance magics in a real InteractiveShell: a cell runs
under its stance and the previous one comes back (after an error, a syntax
error, an interrupt), the session stance, backends, one-line usage errors
before the cell runs, help, load/reload/unload, and a stance cell that
behaves as a plain cell (IPython syntax, tracebacks, top-level await, a
coroutine shown and not run)."""

from __future__ import annotations

import re
import signal
import threading
from typing import Any

import pytest
import torch
from torch._dynamo.testing import CompileCounter

import stance_magic
from stance_magic import probe

from conftest import run, text_outputs

ALL = probe.supported_stances()


def current(sh):
    return sh.user_ns["stance_magic"].current_stance()


@pytest.mark.parametrize("name", ALL)
def test_cell_runs_under_stance_and_restores(shell, name):
    shell.run_cell("import stance_magic")
    res, _ = run(shell, f"%%stance {name} -q\ninside = stance_magic.current_stance().name")
    assert res.success
    assert shell.user_ns["inside"] == name
    assert stance_magic.current_stance().name == "default"


def test_every_stance_of_this_torch_is_offered():
    assert set(ALL) >= {
        "default",
        "force_eager",
        "eager_on_recompile",
        "fail_on_recompile",
        "eager_then_compile",
        "aot_eager_then_compile",
    }


def test_force_eager_cell_really_runs_eagerly(shell):
    cc = CompileCounter()
    shell.user_ns.update(torch=torch, f=torch.compile(lambda x: x * 2, backend=cc))
    run(shell, "%%stance force_eager -q\nf(torch.ones(2))")
    assert cc.frame_count == 0
    run(shell, "%%stance default -q\nf(torch.ones(2))")
    assert cc.frame_count == 1


def test_line_magic_sets_session_for_following_cells(shell):
    res, cap = run(shell, "%stance force_eager")
    assert res.success and "session stance: force_eager (was: default)" in cap.stdout
    shell.run_cell("import stance_magic\nname = stance_magic.current_stance().name")
    assert shell.user_ns["name"] == "force_eager"
    _, cap = run(shell, "%stance")
    assert "force_eager" in cap.stdout and "skip_guard_eval_unsafe=False" in cap.stdout
    assert "backend=None" in cap.stdout
    # a cell stance overrides the session stance for that cell only
    run(shell, "%%stance eager_on_recompile -q\ninside = stance_magic.current_stance().name")
    assert shell.user_ns["inside"] == "eager_on_recompile"
    assert stance_magic.current_stance().name == "force_eager"
    # no STANCE: the cell runs under the session stance
    run(shell, "%%stance -q\ninside = stance_magic.current_stance().name")
    assert shell.user_ns["inside"] == "force_eager"
    run(shell, "%stance default")
    assert stance_magic.current_stance().name == "default"


def test_current_stance_value_object():
    s = stance_magic.current_stance()
    assert (s.name, s.skip_guard_eval_unsafe, s.backend) == ("default", False, None)
    with torch.compiler.set_stance("default", force_backend="eager"):
        s = stance_magic.current_stance()
        assert s.backend == "eager" and str(s) == "default (backend=eager)"
    assert "Stance(name='default'" in repr(stance_magic.current_stance())


def test_backend_by_name_and_callable_from_namespace(shell):
    shell.run_cell(
        "import torch, stance_magic\n"
        "calls = []\n"
        "def mybackend(gm, example_inputs):\n"
        "    calls.append(len(gm.graph.nodes))\n"
        "    return gm.forward\n"
        "f = torch.compile(lambda x: x + 1)\n"
    )
    res, _ = run(
        shell,
        "%%stance default -b mybackend -q\ny = f(torch.ones(3))\n"
        "inside = stance_magic.current_stance()",
    )
    assert res.success, res.error_in_exec
    assert shell.user_ns["calls"], "the notebook's backend was not used"
    assert shell.user_ns["inside"].backend is shell.user_ns["mybackend"]
    assert stance_magic.current_stance().backend is None
    res, _ = run(shell, "%%stance -b eager -q\ninside = stance_magic.current_stance()")
    assert shell.user_ns["inside"].backend == "eager" and shell.user_ns["inside"].name == "default"


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("%%stance eager_then_compil", "did you mean 'eager_then_compile'"),
        ("%%stance force_eager -b eager", "only be forced with the 'default' stance"),
        ("%%stance default -b eagr", "unknown backend 'eagr' (did you mean 'eager'?)"),
        ("%%stance default --bogus", "unrecognized arguments: --bogus"),
        ("%%stance default extra", "unexpected word 'extra'"),
        ("%%stance default --repeat 3", "--repeat goes with --compare"),
    ],
)
def test_bad_input_is_usage_error_before_the_cell_runs(shell, line, needle):
    res, cap = run(shell, f"{line}\nside_effect = 1")
    assert not res.success
    err = res.error_in_exec
    assert type(err).__name__ == "UsageError"
    assert needle in str(err)
    assert "\n" not in str(err)
    assert "side_effect" not in shell.user_ns
    assert stance_magic.current_stance().name == "default"


def test_bad_line_magic_input(shell):
    for line, needle in [
        ("%stance nope", "unknown stance or command 'nope'"),
        ("%stance default extra", "unexpected word 'extra'"),
        ("%stance fail_on_recompile -b eager", "only be forced"),
        ("%stance watch maybe", "usage: %stance watch on|off"),
    ]:
        res, _ = run(shell, line)
        assert type(res.error_in_exec).__name__ == "UsageError", line
        assert needle in str(res.error_in_exec), (line, str(res.error_in_exec))
    assert stance_magic.current_stance().name == "default"


def test_a_previous_stance_with_a_backend_reads_without_nested_parentheses(shell):
    """A stance named inside "(was: ...)" gives its backend and flag after
    commas: "(was: default (backend=eager))" read badly."""
    _, cap = run(shell, "%stance default -b eager")
    assert "session stance: default (backend=eager) (was: default)" in cap.stdout
    _, cap = run(shell, "%stance default")
    assert "session stance: default (was: default, backend=eager)" in cap.stdout
    run(shell, "%stance default -b eager -u")
    _, cap = run(shell, "%stance force_eager")
    assert (
        "session stance: force_eager (was: default, backend=eager, skip_guard_eval_unsafe)"
        in cap.stdout
    )
    assert "((" not in cap.stdout and "))" not in cap.stdout
    run(shell, "%stance default -q")


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        # an unknown first word is named before an unknown option
        ("%stance bogus-subcommand --foo", "unknown stance or command 'bogus-subcommand'"),
        ("%stance histroy --foo", "unknown stance or command 'histroy' (did you mean 'history'?)"),
        ("%stance forc_eager --foo", "(did you mean 'force_eager'?)"),
        ("%stance bogus --compare", "unknown stance or command 'bogus'"),
        ("%stance bogus -b", "unknown stance or command 'bogus'"),
        ("%%stance bogus --foo", "unknown stance 'bogus'; this torch has: default"),
        ("%%stance eager_then_compil --repeat x", "did you mean 'eager_then_compile'"),
        ("%stance cache bogus --foo", "usage: %stance cache save PATH"),
        ("%stance cache precompile maybe --foo", "usage: %stance cache precompile [on|off]"),
        ("%stance watch maybe --foo", "usage: %stance watch on|off"),
        ("%stance default extra --foo", "unexpected word 'extra'"),
        # a valid word: the option is what is wrong
        ("%stance default --foo", "unrecognized arguments: --foo"),
        ("%%stance default --foo", "unrecognized arguments: --foo"),
        ("%stance cache save --foo", "unrecognized arguments: --foo"),
        ("%stance default -b", "argument -b/--backend/--force-backend: expected one argument"),
    ],
)
def test_the_first_wrong_word_is_the_error(shell, line, needle):
    cell = line.startswith("%%")
    res, _ = run(shell, f"{line}\nside_effect = 1" if cell else line)
    err = res.error_in_exec
    assert type(err).__name__ == "UsageError", (line, err)
    assert needle in str(err) and "\n" not in str(err), (line, str(err))
    if "unknown stance" in needle or "usage:" in needle:
        assert "--foo" not in str(err)
    assert "side_effect" not in shell.user_ns
    assert stance_magic.current_stance().name == "default"


def test_an_unknown_word_lists_the_stances_and_on_a_line_the_commands(shell):
    line = str(run(shell, "%stance bogus")[0].error_in_exec)
    assert ("; commands: watch, history" in line) and ("force_eager" in line)
    cell = str(run(shell, "%%stance bogus\nx = 1")[0].error_in_exec)
    assert cell.startswith("unknown stance 'bogus'; this torch has:") and "commands" not in cell


def test_backend_suggestions_offer_notebook_functions(shell):
    shell.run_cell("def my_compiler(gm, ex):\n    return gm.forward")
    res, _ = run(shell, "%stance default -b my_compilr")
    msg = str(res.error_in_exec)
    assert "my_compiler" in msg and "inductor" in msg and "get_ipython" not in msg


def test_stance_of_a_newer_torch_names_the_release(shell, monkeypatch):
    # Older torch cannot run here; the probe's answer is what changes between them.
    monkeypatch.setattr(probe.stances, "_SUPPORTED", ("default", "force_eager"))
    res, _ = run(shell, "%%stance eager_then_compile\nx = 1")
    assert "needs torch >= 2.7" in str(res.error_in_exec)


def test_restored_after_exception(shell):
    res, cap = run(shell, "%%stance force_eager -q\nraise ValueError('boom')")
    assert isinstance(res.error_in_exec, ValueError)
    assert "boom" in cap.stdout + cap.stderr
    assert stance_magic.current_stance().name == "default"


def test_restored_after_syntax_error(shell):
    res, cap = run(shell, "%%stance force_eager -q\nx = = 1")
    assert isinstance(res.error_before_exec, SyntaxError)
    assert stance_magic.current_stance().name == "default"


def _shown(shell, src: str) -> tuple[Any, str]:
    """What a cell shows, without colours (``In [N]`` made ``In [#]``)."""
    was = shell.colors
    shell.colors = "nocolor"
    try:
        res, cap = run(shell, src)
    finally:
        shell.colors = was
    # (IPython 8 keeps its colours whatever ``colors`` says later: taken out)
    text = re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout + cap.stderr)
    return res, re.sub(r"In ?\[\d+\]", "In [#]", text)


@pytest.mark.parametrize(
    "body", ["x = (1,\ny = 2", "y = 1\n  z = 2", "y = 1\nreturn 5", "%time x = 1\ny = = 2"]
)
def test_a_syntax_error_shows_what_a_plain_cell_shows_and_nothing_runs(shell, body):
    """IPython's own error before execution: the cell's line and the caret,
    no frames (none of IPython's, none of ours); nothing of the cell runs,
    no stance is applied, no report is made, and the next cell is numbered
    as after a plain cell's syntax error."""
    history = len(stance_magic.history())
    plain_res, plain = _shown(shell, body)
    assert isinstance(plain_res.error_before_exec, SyntaxError)
    count = shell.execution_count
    res, shown = _shown(shell, "%%stance force_eager\n" + body)
    assert type(res.error_before_exec) is type(plain_res.error_before_exec)
    assert res.error_in_exec is None and not res.success
    assert shown == plain, shown
    assert "stance_magic" not in shown and "Traceback" not in shown
    assert shell.execution_count == count + 1
    assert len(stance_magic.history()) == history
    assert stance_magic.current_stance().name == "default"
    _, shown = _shown(shell, "%%stance force_eager\nran = True\n" + body)
    assert "ran" not in shell.user_ns


def test_an_exception_shows_the_users_frames_and_none_of_ours(shell):
    """The user's frames and torch's, as IPython shows them in a plain cell;
    stance_magic's own frames are hidden (``__tracebackhide__``)."""
    shell.run_cell(
        "import torch\ndef f(x):\n    return x.sin()\ncf = torch.compile(f, backend='eager')\n"
        "cf(torch.ones(3))\n"
        "def bad(gm, example_inputs):\n    raise RuntimeError('exploded')\n"
        "cb = torch.compile(lambda x: x.cos(), backend=bad)"
    )
    for stance, body, theirs in (
        ("fail_on_recompile", "def h():\n    raise ValueError('boom')\nh()", "in h()"),
        ("fail_on_recompile", "cf(torch.ones(4))", "torch/_dynamo/eval_frame.py"),
        ("default", "cb(torch.ones(2))", "exploded"),  # a compile's error, through our hooks
    ):
        res, shown = _shown(shell, f"%%stance {stance} -q\n" + body)
        assert res.error_in_exec is not None
        assert theirs in shown, shown
        for ours in ("stance_magic/", "magics.py", "execution.py"):
            assert ours not in shown, shown


def test_the_syntax_check_leaves_ipythons_completeness_check_alone(shell):
    """A terminal asks whether a cell is complete while it is typed: an
    unfinished %%stance cell is "incomplete" (a cell magic ends with a blank
    line), as without the extension, never "invalid"."""
    assert shell.check_complete("%%stance\nx = (1,\n")[0] == "incomplete"
    assert shell.check_complete("%%stance\nx = = 1\n\n")[0] == "complete"


@pytest.mark.parametrize(
    "body, line",
    [
        ("x = (1,\ny = 2", "x = (1,"),
        ("x = 1 +", "x = 1 +"),
        ("y = 1\nprint('a'", "print('a'"),
        ("if 1:\n    a = 1\n  b = 2", "b = 2"),
    ],
    ids=["unclosed-parenthesis", "incomplete-expression", "unclosed-call", "bad-dedent"],
)
def test_a_syntax_error_is_the_one_a_plain_cell_gives(shell, body, line):
    """Whatever the error (an unclosed bracket used to raise
    tokenize.TokenError from the magic), a %%stance cell raises the
    SyntaxError a plain cell raises, before execution, naming the user's line."""
    plain = shell.run_cell(body).error_before_exec
    assert isinstance(plain, SyntaxError) and plain.text.strip() == line
    res, _ = run(shell, f"%%stance default -q\n{body}")
    err = res.error_before_exec
    assert type(err) is type(plain), repr(err)
    assert (err.lineno, err.text.strip()) == (plain.lineno, line)
    assert stance_magic.current_stance().name == "default"


def test_restored_after_keyboard_interrupt(shell):
    # Python's own SIGINT handler for the test: a process started in the
    # background by a non-interactive shell (`cmd &`, as CI scripts do)
    # inherits SIGINT ignored, and Python then leaves it ignored.
    started = threading.Event()
    shell.user_ns["started"] = started

    def interrupt():
        if started.wait(30):  # once the cell's body runs
            signal.raise_signal(signal.SIGINT)

    sender = threading.Thread(target=interrupt, daemon=True)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        sender.start()
        res, _ = run(
            shell,
            "%%stance force_eager -q\nimport time\nstarted.set()\n"
            "for _ in range(200):\n    time.sleep(0.05)",
        )
    finally:
        signal.signal(signal.SIGINT, before)
    sender.join(30)
    assert isinstance(res.error_in_exec, KeyboardInterrupt), res.error_in_exec
    assert stance_magic.current_stance().name == "default"


def test_session_stance_restored_after_a_failing_cell_stance(shell):
    run(shell, "%stance eager_on_recompile -q")
    res, _ = run(shell, "%%stance force_eager -q\n1/0")
    assert isinstance(res.error_in_exec, ZeroDivisionError)
    assert stance_magic.current_stance().name == "eager_on_recompile"


def test_cell_behaves_like_a_normal_cell(shell):
    res, cap = run(shell, "%%stance force_eager -q\nx = 41\ny = '{x} $x'\nx + 1")
    assert res.success
    assert shell.user_ns["x"] == 41 and shell.user_ns["y"] == "{x} $x"
    assert res.result == 42
    assert "Out[" in cap.stdout and "42" in cap.stdout
    res, cap = run(shell, "%%stance -q\nx + 2;")
    assert res.result is None


def test_traceback_points_at_the_cells_own_lines(shell):
    res, cap = run(shell, "%%stance force_eager -q\na = 1\nb = 2\nundefined_name_here\n")
    text = cap.stdout + cap.stderr
    assert isinstance(res.error_in_exec, NameError)
    assert "undefined_name_here" in text
    assert "----> 3" in text.replace("\x1b", "") or "line 3" in text


def test_skip_guard_eval_unsafe_warns_once(shell):
    res, cap = run(
        shell, "%%stance default -u -q\nimport stance_magic\ns = stance_magic.current_stance()"
    )
    assert shell.user_ns["s"].skip_guard_eval_unsafe is True
    assert "silently wrong" in cap.stderr and "warmed up" in cap.stderr
    _, cap2 = run(shell, "%%stance default -u -q\npass")
    assert "silently wrong" not in cap2.stderr
    assert stance_magic.current_stance().skip_guard_eval_unsafe is False


def test_help_text(shell):
    doc = shell.find_line_magic("stance").__doc__
    for word in ("%%stance", "--compare", "--sweep", "watch", "history", "reset", "-u"):
        assert word in doc


def test_compiled_region_error_is_readable():
    @torch.compile(backend="eager", fullgraph=False)
    def inner(x):
        stance_magic.set_session_stance("force_eager")
        return x + 1

    with pytest.raises(probe.CompiledRegionError) as info:
        inner(torch.ones(1))
    msg = str(info.value)
    assert probe.COMPILED_REGION_MESSAGE in msg  # torch's own words, kept
    assert "before calling the compiled function" in msg
    assert stance_magic.current_stance().name == "default"


def test_probe_wraps_torch_error_inside_compiled_region(monkeypatch):
    # torch refuses set_stance while an eval-frame callback is active; the
    # probe keeps torch's message and says what to do.
    from torch._C._dynamo import eval_frame as c_ef

    monkeypatch.setattr(c_ef, "get_eval_frame_callback", lambda: lambda *a: None)
    with pytest.raises(probe.CompiledRegionError) as info:
        probe.set_stance("force_eager", False, None)
    assert probe.COMPILED_REGION_MESSAGE in str(info.value)
    assert "before calling the compiled function" in str(info.value)


def test_reload_does_not_register_twice(shell):
    n_post = len(shell.events.callbacks["post_run_cell"])
    shell.run_cell("%reload_ext stance_magic")
    shell.run_cell("%load_ext stance_magic")
    assert len(shell.events.callbacks["post_run_cell"]) == n_post
    _, cap = run(shell, "%%stance force_eager\nx = 1")
    assert sum(t.startswith("stance_magic · ") for t in text_outputs(cap)) == 1


def test_unload_removes_hooks_and_restores_the_stance_before_load():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    InteractiveShell.clear_instance()
    c = Config()
    c.HistoryAccessor.enabled = False
    sh = InteractiveShell.instance(config=c)
    before_hooks = {k: list(v) for k, v in sh.events.callbacks.items()}
    guard_hook_before = torch._C._dynamo.eval_frame.set_guard_complete_hook(None)
    torch._C._dynamo.eval_frame.set_guard_complete_hook(guard_hook_before)
    torch.compiler.set_stance("eager_on_recompile")
    try:
        sh.run_cell("%load_ext stance_magic")
        sh.run_cell("%stance force_eager -q")
        sh.run_cell(
            "%%stance default -q\nimport torch\n"
            "torch.compile(lambda x: x+1, backend='eager')(torch.ones(1))"
        )
        sh.run_cell("%unload_ext stance_magic")
        assert stance_magic.current_stance().name == "eager_on_recompile"
        assert {k: list(v) for k, v in sh.events.callbacks.items()} == before_hooks
        assert sh.find_line_magic("stance") is None and sh.find_cell_magic("stance") is None
        hook = torch._C._dynamo.eval_frame.set_guard_complete_hook(None)
        torch._C._dynamo.eval_frame.set_guard_complete_hook(hook)
        assert hook is guard_hook_before
        import torch._dynamo.guards as guards
        from torch._dynamo.callback import callback_handler

        assert guards.guard_manager_testing_hook_fn is None
        assert not any(
            "stance_magic" in getattr(f, "__module__", "")
            for f in callback_handler.start_callbacks + callback_handler.end_callbacks
        )
    finally:
        torch.compiler.set_stance("default")
        InteractiveShell.clear_instance()


def test_import_is_light():
    import subprocess
    import sys

    code = (
        "import sys, stance_magic\n"
        "mods = ('torch', 'matplotlib', 'ipywidgets', 'IPython')\n"
        "heavy = [m for m in mods if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unload_while_watching_restores_torch_record_limit():
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.clear_instance()
    sh = InteractiveShell.instance()
    try:
        sh.run_cell("%load_ext stance_magic")
        sh.run_cell("%stance watch on")
        sh.run_cell("x = 1")
        sh.run_cell("%unload_ext stance_magic")
        assert probe.deque_limit() == 64
        from stance_magic.session.engine import get_engine

        assert get_engine().watch is False and get_engine()._recorder is None
    finally:
        InteractiveShell.clear_instance()


def test_ipython_syntax_inside_a_stance_cell(shell):
    res, cap = run(
        shell, "%%stance force_eager -q\nv = 3\n%time w = v * 2\nimport math\nmath.sqrt?"
    )
    assert res.success, res.error_in_exec
    assert shell.user_ns["w"] == 6
    res, cap = run(shell, "%%stance -q\n    indented = 1\n    other = 2")
    assert res.success and shell.user_ns["other"] == 2


def test_top_level_await_in_a_stance_cell(shell):
    shell.run_cell("async def three():\n    return 3")
    res, _ = run(shell, "%%stance force_eager -q\nx = await three()\nx + 1")
    assert res.success, res.error_in_exec
    assert shell.user_ns["x"] == 3 and res.result == 4


def test_a_coroutine_call_is_shown_not_run_as_in_a_plain_cell(shell):
    import inspect

    shell.run_cell("ran = []\nasync def job():\n    ran.append(1)\n    return 5")
    plain, _ = run(shell, "job()")
    magic, cap = run(shell, "%%stance -q\njob()")
    try:
        assert inspect.iscoroutine(plain.result)
        assert inspect.iscoroutine(magic.result), magic.result
        assert "coroutine object" in cap.stdout
        assert shell.user_ns["ran"] == []
    finally:
        for r in (plain.result, magic.result):
            if inspect.iscoroutine(r):
                r.close()
    # only a top-level await is awaited
    res, _ = run(shell, "%%stance -q\nawait job()")
    assert res.result == 5 and shell.user_ns["ran"] == [1]


def test_line_flags_keep_the_session_stance(shell):
    run(shell, "%stance force_eager -q")
    run(shell, "%stance -u -q")
    s = stance_magic.current_stance()
    assert s.name == "force_eager" and s.skip_guard_eval_unsafe
    res, _ = run(shell, "%stance -b eager")
    assert "only be forced with the 'default' stance" in str(res.error_in_exec)


def test_sweep_refuses_a_backend(shell):
    res, _ = run(shell, "%%stance --sweep -b eager\nran = 1")
    assert "-b does not go with --sweep" in str(res.error_in_exec)
    assert "ran" not in shell.user_ns


def test_semicolon_with_a_trailing_comment_hides_the_value(shell):
    res, _ = run(shell, "%%stance -q\nx = 41\nx;  # hidden")
    assert res.result is None


def test_cell_number_in_tracebacks_is_the_cells_own(shell):
    res, cap = run(shell, "%%stance -q\n1/0")
    n = res.execution_count
    assert f"In[{n}]" in (cap.stdout + cap.stderr).replace(" ", "")


def test_a_direct_set_stance_inside_a_stance_cell_is_undone_and_said(shell):
    res, cap = run(
        shell, "%%stance default -q\nimport torch\ntorch.compiler.set_stance('force_eager')"
    )
    assert res.success
    assert stance_magic.current_stance().name == "default"
    assert "set the stance to force_eager itself" in cap.stderr
    assert "%stance force_eager" in cap.stderr
