"""Cells where torch's own compile fails, and refusals inside a cell, on
whichever torch release is installed (run on every pair of the matrix).

Each figure is checked against torch's own account, never against
stance_magic's: the ``CompilationMetrics`` records torch wrote during the
cell (``get_compilation_metrics()``), the exception the cell raised, the
graphs a counting backend was handed, and torch's ``recompiles`` log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from torch._dynamo.utils import get_compilation_metrics

from stance_magic import probe

from conftest import RECOMPILES_LOGGER, last, run, torch_log

SETUP = "import torch, stance_magic\nfrom torch._dynamo.testing import CompileCounterWithBackend\n"


@pytest.fixture
def sh(shell):
    shell.run_cell(SETUP + "stance_magic.probe.reset_compiled_code()")
    return shell


def measured(sh, cell: str):
    """Run ``cell`` and return (IPython's result, torch's frame-compile
    records written while it ran)."""
    t0 = time.time_ns() // 1000
    res, _ = run(sh, cell)
    t1 = time.time_ns() // 1000
    recs = [
        r
        for r in get_compilation_metrics()
        if t0 <= (r.start_time_us or 0) <= t1 and r.is_forward is not False and not r.is_runtime
    ]
    return res, recs


def reached_the_cell(rec, error: BaseException | None) -> bool:
    """Whether the failure torch recorded is the error the cell raised, read
    from torch's record and the exception alone: torch raises it as it is
    (``fail_type``, its message starting with ``fail_reason``), or rewrapped as
    ``InternalTorchDynamoError('<fail_type>: <fail_reason>')``."""
    if error is None or not rec.fail_type:
        return False
    text, reason = str(error), rec.fail_reason or ""
    if type(error).__name__ == "InternalTorchDynamoError":
        return text.startswith(f"{rec.fail_type}: {reason}")
    return type(error).__qualname__ == rec.fail_type and text.startswith(reason)


def assert_agrees_with_torch(rep, recs, error, frame_count: int) -> None:
    """Compiles, failures, graphs and the failure that reached the cell, as
    torch's records, the cell's exception and the counting backend say."""
    assert [f.compile_id for f in rep.frames] == [str(r.compile_id) for r in recs]
    assert rep.compiles == len(recs)
    failed = [str(r.compile_id) for r in recs if r.fail_type]
    assert [f.compile_id for f in rep.frames if f.failed] == failed
    assert rep.failed_compiles == len(failed)
    assert rep.graphs == frame_count
    reached = [str(r.compile_id) for r in recs if reached_the_cell(r, error)]
    assert [f.compile_id for f in rep.frames if f.raised] == reached


def assert_failures_told_as_they_happened(rep, recs, error, first: bool = True) -> None:
    """An eager_then_compile cell whose first call is its function's first
    (``first``): that call is counted as the eager first call whatever
    happened in it (torch runs a frame eagerly at its first example); a call
    that raised because a compile failed (torch's record of it is the
    cell's error) is told as a compile error, never "its code raised", and
    the frame whose compile raised is never "ran eagerly"."""
    if first:
        assert rep.eager_first_calls == 1, rep.calls
    if any(reached_the_cell(r, error) for r in recs):
        assert rep.calls.failed == {probe.WHY_COMPILE_ERROR: 1}, rep.calls
        text = rep.text(verbose=True)
        assert "its code raised" not in text and "1 call raised (compile error)" in text
        raised = sum(1 for f in rep.frames if f.raised)
        assert raised == 1 and text.count("FAILED: its error is the cell's") == raised
        ran_eagerly = sum(1 for f in rep.frames if f.failed and not f.raised)
        assert text.count("not compiled, ran eagerly") == ran_eagerly


# --------------------------------------------------------------------------
# a nested compile that fails inside eager_then_compile's eager first call
# --------------------------------------------------------------------------

#: ``outer``'s first call runs eagerly; ``inner``, called twice in it, is
#: compiled at its second call (two examples) by a backend that raises: the
#: error reaches the cell (every torch of the matrix, bare as measured).
NESTED = (
    "def exploding(gm, example_inputs):\n"
    "    raise RuntimeError('the backend exploded')\n"
    "def inner(x):\n"
    "    return x.sin() + 1\n"
    "def outer(x):\n"
    "    return inner(x), inner(x[:2])\n"
    "cf = torch.compile(outer, backend=exploding)\n"
)


def test_a_nested_compile_failing_in_the_eager_first_call_is_told_as_it_happened(sh):
    sh.run_cell(NESTED)
    res, recs = measured(sh, "%%stance eager_then_compile -q\ncf(torch.ones(3))")
    error = res.error_in_exec
    assert type(error).__name__ == "BackendCompilerFailed"  # torch's, as bare torch raises it
    (rec,) = recs
    assert rec.co_name == "inner" and rec.fail_type == "BackendCompilerFailed"
    assert reached_the_cell(rec, error)
    rep = last(sh)
    assert_agrees_with_torch(rep, recs, error, frame_count=0)
    assert_failures_told_as_they_happened(rep, recs, error)
    (frame,) = rep.frames
    assert frame.raised and frame.during_eager_call


# --------------------------------------------------------------------------
# a compile that fails inside Dynamo
# --------------------------------------------------------------------------

#: A function called under eager_then_compile with 1-d inputs, then a 2-d
#: one: torch compiles from the dynamism of the first two inputs, which has
#: one dimension, and fails inside Dynamo with an IndexError (2.8, 2.10 and
#: 2.13; 2.15 compiles it).
RANK_CHANGE = (
    "cc = CompileCounterWithBackend('eager')\n"
    "def body(x):\n"
    "    return x.sin() + 1\n"
    "f = torch.compile(body, backend=cc)\n"
)
RANK_CELL = "for shape in [(3,), (4,), (2, 5)]:\n    y = f(torch.ones(shape))\n"


def test_a_compile_that_fails_inside_dynamo_is_marked_as_the_cells_error(sh):
    """torch records the failed compile with the type it caught (IndexError);
    before 2.13 the error that reaches the cell is that failure rewrapped as
    an InternalTorchDynamoError. The report marks that compile as the cell's
    error on every release, and counts compiles, failures and graphs as
    torch's records and the counting backend do."""
    sh.run_cell(RANK_CHANGE)
    res, recs = measured(sh, "%%stance eager_then_compile -q\n" + RANK_CELL)
    error = res.error_in_exec
    rep = last(sh)
    assert_agrees_with_torch(rep, recs, error, sh.user_ns["cc"].frame_count)
    if not any(r.fail_type for r in recs):
        # torch 2.15 compiles the rank change (2.8, 2.10 and 2.13 fail)
        assert probe.torch_version() > (2, 13), recs
        assert error is None and rep.failed_compiles == 0
        return
    (failed,) = [r for r in recs if r.fail_type]
    assert failed.fail_type == "IndexError"
    if probe.torch_version() >= probe.INDEX_ERROR_UNWRAPPED_SINCE:
        assert type(error).__name__ == "IndexError"
    else:
        assert type(error).__name__ == "InternalTorchDynamoError"
    (frame,) = [f for f in rep.frames if f.raised]
    assert frame.compile_id == str(failed.compile_id) and frame.name == "body"
    text = " ".join(str(rep).split())
    # the frame's failure is the cell's error: said once, in the error row
    assert "1 FAILED" in text and "FAILED: its error is the cell's (see error)" in text
    assert text.count(rep.error) == 1  # (the headline names its type only)
    assert "not compiled, ran eagerly" not in text


def test_a_failed_compile_torch_ran_eagerly_is_not_the_cells_error(sh):
    """With ``suppress_errors`` torch runs the frame whose compile failed
    (a backend raised) eagerly; a later error whose type has the same name,
    raised by the cell itself, is not that failure: no compile is marked as
    the cell's error, the failed one is reported as run eagerly."""
    sh.run_cell(
        "def bad(gm, example_inputs):\n"
        "    raise ValueError('backend exploded')\n"
        "fb = torch.compile(lambda x: x.sin(), backend=bad)\n"
        "class BackendCompilerFailed(Exception):\n"
        "    pass\n"
    )
    cell = "y = fb(torch.ones(2))\nraise BackendCompilerFailed('the cell raised this itself')\n"
    with torch._dynamo.config.patch(suppress_errors=True):
        res, recs = measured(sh, "%%stance default -q\n" + cell)
    error = res.error_in_exec
    assert str(error) == "the cell raised this itself"
    assert sh.user_ns["y"].tolist() == torch.ones(2).sin().tolist()  # ran eagerly
    (failed,) = [r for r in recs if r.fail_type]
    assert failed.fail_type == type(error).__name__ == "BackendCompilerFailed"
    rep = last(sh)
    assert_agrees_with_torch(rep, recs, error, 0)
    assert rep.failed_compiles == 1 and not any(f.raised for f in rep.frames)
    text = " ".join(str(rep).split())
    assert "not compiled, ran eagerly: BackendCompilerFailed" in text and "FAILED," not in text


# --------------------------------------------------------------------------
# transformers models whose shared decorator frames fail to compile
# --------------------------------------------------------------------------


def _transformers():
    try:
        import transformers
    except Exception as err:  # ImportError, or one from an unsupported torch
        pytest.skip(f"transformers does not import with torch {torch.__version__}: {err}")
    return transformers


_CHILD = "STANCE_MAGIC_TEST_CHILD"


def _ran_in_a_fresh_process(request) -> bool:
    """On torch 2.8, run this test in a fresh Python instead (True: it ran
    there and passed; the caller returns).

    torch 2.8 keeps the callback each cache entry was made with as a bare
    pointer, and under eager_then_compile that callback is built for one call
    and freed after it (see ``probe.DELAYED_CALLBACK_LINKED_SINCE``): a later
    lookup may read freed memory, and whether that crashes the process
    depends on what was allocated there since. In a process that ran other
    tests first, these models did crash it; in a fresh one they did not.
    A crash is retried twice, as it is torch's and depends on allocation (a fresh
    2.8 venv crashed twice running BART in a row once).
    """
    if probe.torch_version() >= probe.DELAYED_CALLBACK_LINKED_SINCE or os.environ.get(_CHILD):
        return False
    tests = os.path.dirname(os.path.abspath(__file__))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid]
    env = {**os.environ, _CHILD: "1"}
    for _ in range(3):
        child = subprocess.run(
            cmd, cwd=os.path.dirname(tests), env=env, capture_output=True, text=True, timeout=600
        )
        if child.returncode != -signal.SIGSEGV:
            break
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-4000:]
    return True


#: Small configs with random weights: one layer, hidden size 32.
MODELS = {
    "bert": (
        "BertModel",
        "BertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2,"
        " intermediate_size=64, vocab_size=100, max_position_embeddings=64)",
    ),
    "llama": (
        "LlamaModel",
        "LlamaConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2,"
        " num_key_value_heads=2, intermediate_size=64, vocab_size=100,"
        " max_position_embeddings=64)",
    ),
    "t5": (
        "T5Model",
        "T5Config(num_layers=1, num_decoder_layers=1, d_model=32, d_kv=16, num_heads=2,"
        " d_ff=64, vocab_size=100)",
    ),
    "bart": (
        "BartModel",
        "BartConfig(encoder_layers=1, decoder_layers=1, d_model=32,"
        " encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,"
        " decoder_ffn_dim=64, vocab_size=100, max_position_embeddings=64)",
    ),
}


def _measure_model(sh, name: str, first: bool = True):
    """Build model ``name``, compile it with a counting backend and call it
    with sequence lengths 8, 12 and 16 in an ``eager_then_compile`` cell;
    check every figure against torch's. Returns (the cell's error, records)."""
    cls, config = MODELS[name]
    sh.run_cell(
        "import transformers\n"
        "torch.manual_seed(0)\n"
        f"m = transformers.{cls}(transformers.{config}).eval()\n"
        "cc = CompileCounterWithBackend('eager')\n"
        "cm = torch.compile(m, backend=cc)\n"
    )
    call = (
        "cm(input_ids=ids, decoder_input_ids=ids)"
        if name in ("t5", "bart")
        else "cm(input_ids=ids)"
    )
    res, recs = measured(
        sh,
        "%%stance eager_then_compile -q\n"
        "with torch.no_grad():\n"
        "    for n in (8, 12, 16):\n"
        "        ids = torch.randint(0, 100, (1, n))\n"
        f"        out = {call}\n",
    )
    rep = last(sh)
    error = res.error_in_exec
    assert_agrees_with_torch(rep, recs, error, sh.user_ns["cc"].frame_count)
    assert_failures_told_as_they_happened(rep, recs, error, first)
    if error is not None and not any(reached_the_cell(r, error) for r in recs):
        # torch raised before any compile record (torch 2.8's eager_then_compile
        # callback, reading a half-built module's attributes): no compile is the error
        assert not any(f.raised for f in rep.frames)
    return error, recs


@pytest.mark.unpinned_callbacks  # (in a fresh process on 2.8: what its users see)
@pytest.mark.parametrize("name", list(MODELS))
def test_transformers_model_compiles_and_failures_against_torch(sh, request, name):
    """A transformers model compiled with a counting backend, called with
    sequence lengths 8, 12 and 16 under eager_then_compile: transformers'
    decorator frames (shared by every model) fail to compile on some
    releases, and torch runs them eagerly or raises. The report's compiles,
    failures, graphs and the failure marked as the cell's error are torch's."""
    _transformers()
    if _ran_in_a_fresh_process(request):
        return
    _measure_model(sh, name)


@pytest.mark.unpinned_callbacks
def test_a_shared_decorator_frame_compiled_from_another_models_inputs(sh, request):
    """eager_then_compile keeps a frame's first two inputs by file and line,
    and reset() keeps them: transformers' decorator frames, shared by every
    model, then compile T5 from GPT-2's inputs. On torch 2.10 Dynamo fails
    inside (an IndexError, rewrapped) and the error reaches the cell; the
    report marks that compile, as torch's record and the error say."""
    _transformers()
    if _ran_in_a_fresh_process(request):
        return
    sh.run_cell(
        "import models\n"
        "g = torch.compile(models.gpt2(), backend='eager')\n"
        "with torch.compiler.set_stance('eager_then_compile'):\n"
        "    models.generate(g, torch.randint(0, 256, (1, 8)), 3)\n"
        "torch.compiler.reset()\n"
    )
    # (transformers' decorator frames had their first example in GPT-2's
    # calls: torch compiles them at T5's first call, which is not eager)
    error, recs = _measure_model(sh, "t5", first=False)
    if error is not None and any(reached_the_cell(r, error) for r in recs):
        assert sum(f.raised for f in last(sh).frames) == 1


# --------------------------------------------------------------------------
# a refusal inside a cell
# --------------------------------------------------------------------------

STRICT = (
    "@torch.compile(backend='eager', dynamic=False)\n"
    "def f(x):\n"
    "    return x * 2\n"
    "@torch.compiler.set_stance('fail_on_recompile')\n"
    "def strict(x):\n"
    "    return f(x)\n"
    "f(torch.ones(3))\n"
)


def test_a_refusal_inside_a_cell_names_the_guard_torch_checked(sh):
    """A function decorated with ``set_stance("fail_on_recompile")`` called
    with a new shape inside a ``%%stance default`` cell: torch refuses. The
    report names the guard that failed as torch words it (its recompiles log
    when the same call is then allowed to recompile; from 2.10 its error
    too), on every release; the call that matches is still a cache hit."""
    sh.run_cell(STRICT)
    res, recs = measured(sh, "%%stance default -q\nstrict(torch.ones(3))\nstrict(torch.ones(7))")
    error = res.error_in_exec
    assert isinstance(error, RuntimeError) and "fail_on_recompile" in str(error)
    assert recs == []  # torch compiled nothing: it refused
    rep = last(sh)
    assert rep.refused_recompiles == 1 and rep.compiles == 0
    assert (rep.cache_hits, rep.cache_misses) == (1, 1)
    # torch's own words for that guard: the same call, allowed to recompile
    with torch_log(RECOMPILES_LOGGER, recompiles=True) as log:
        sh.run_cell("f(torch.ones(7))")
    (message,) = log.messages
    torch_guards = [ln.strip()[2:] for ln in message.splitlines() if ln.strip().startswith("- ")]
    assert torch_guards == ["0/0: tensor 'x' size mismatch at index 0. expected 3, actual 7"]
    assert rep.refused_guards == torch_guards
    if probe.torch_version() >= probe.REFUSAL_GUARDS_SINCE:
        assert all(g in str(error) for g in torch_guards)
    assert "guard that failed: 0/0: tensor 'x' size mismatch" in str(rep)


def test_a_refusal_measured_raises_what_torch_raises_unmeasured(sh):
    """The recorder's part in a refusal (torch 2.8: reading the guards just
    before torch's callback raises) leaves torch's error as it is."""
    sh.run_cell(STRICT)
    unmeasured = sh.run_cell("strict(torch.ones(5))").error_in_exec
    sh.run_cell("stance_magic.probe.reset_compiled_code()\nf(torch.ones(3))")
    res, _ = measured(sh, "%%stance default -q\nstrict(torch.ones(5))")
    assert type(res.error_in_exec) is type(unmeasured) is RuntimeError
    assert str(res.error_in_exec).splitlines()[0] == str(unmeasured).splitlines()[0]
    assert last(sh).refused_guards == [
        "0/0: tensor 'x' size mismatch at index 0. expected 3, actual 5"
    ]
