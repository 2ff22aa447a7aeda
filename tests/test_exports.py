"""``%stance history --csv PATH --json PATH``: what is written and what is
refused. Both files or neither (what was written is said when the second
fails), one line printed instead of the table, odd text escaped, a symlink
written through, a device node or FIFO refused in one line, and no
descriptor or temporary file left behind when an export fails.
"""

from __future__ import annotations

import os

import pytest

import stance_magic

from conftest import run


def test_history_export_writes_both_or_neither(sh, tmp_path):
    sh.run_cell("r = torch.compile(lambda x: x + 1, backend='eager')")
    run(sh, "%%stance default -q\nr(torch.ones(2))")
    good = tmp_path / "good.csv"
    res, cap = run(sh, f"%stance history --csv {good} --json {tmp_path}/nope/x.json")
    assert not res.success
    assert not good.exists()
    err = str(res.error_in_exec)
    assert "nope" in err and "nothing was written" in err
    res, cap = run(sh, f"%stance history --csv {good} --json {tmp_path}/x.json -q")
    assert res.success and good.exists() and (tmp_path / "x.json").exists()


def test_history_export_says_what_was_written_when_the_second_fails(tmp_path, monkeypatch):
    from stance_magic.render import export

    real = export.atomic_write
    calls = []

    def flaky(path, text):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(export, "atomic_write", flaky)
    with pytest.raises(export.ExportError) as info:
        export.write_exports([], tmp_path / "a.csv", tmp_path / "b.json")
    assert "already written" in str(info.value) and "a.csv" in str(info.value)
    assert os.path.exists(tmp_path / "a.csv")


def test_an_export_prints_one_line_not_the_table(shell, tmp_path):
    run(shell, "%%stance -q\nx = 1")
    p = tmp_path / "h.csv"
    res, cap = run(shell, f"%stance history --csv {p}")
    assert res.success and res.result is None
    assert cap.stdout.splitlines() == [f"wrote 1 row to {p}"]
    assert not cap.outputs
    _, cap = run(shell, f"%stance history --csv {p} -q")
    assert not cap.stdout and not cap.outputs


def _fds() -> set[str]:
    """The process's open descriptors (by number): a leak is one left open
    that was not before; another thread may close one meanwhile."""
    import os

    return set(os.listdir("/proc/self/fd"))


@pytest.fixture
def odd_error(shell):
    """A history whose one report's error text holds a surrogate-escaped byte."""
    res, _ = run(
        shell, "%%stance -q\nraise ValueError(b'bad \\xff byte'.decode('utf-8', 'surrogateescape'))"
    )
    assert isinstance(res.error_in_exec, ValueError)
    assert "\udcff" in stance_magic.get_engine().history[-1].error
    return shell


def test_export_escapes_a_surrogate_byte(odd_error, tmp_path):
    import json

    csv_p, json_p = tmp_path / "h.csv", tmp_path / "h.json"
    res, cap = run(odd_error, f"%stance history --csv {csv_p} --json {json_p}")
    assert res.success, res.error_in_exec
    text = csv_p.read_bytes().decode("utf-8")  # valid UTF-8, whole
    assert "ValueError: bad \\udcff byte" in text and text.count("\n") == 2
    assert json.loads(json_p.read_text())[0]["error"] == "ValueError: bad \udcff byte"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.csv", "h.json"]


def test_export_writes_through_a_symlink_to_a_regular_file(shell, tmp_path):
    run(shell, "%%stance -q\nx = 1")
    real = tmp_path / "real.csv"
    real.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    res, _ = run(shell, f"%stance history --csv {link}")
    assert res.success, res.error_in_exec
    assert link.is_symlink() and link.resolve() == real
    assert real.read_text().startswith("cell,")
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "new.csv")
    res, _ = run(shell, f"%stance history --json {dangling}")
    assert res.success, res.error_in_exec
    assert dangling.is_symlink() and (tmp_path / "new.csv").read_text().startswith("[")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dangling.csv",
        "link.csv",
        "new.csv",
        "real.csv",
    ]


def test_export_refuses_a_device_node_or_fifo_in_one_line(shell, tmp_path):
    import os
    import stat

    run(shell, "%%stance -q\nx = 1")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    to_dev = tmp_path / "to_null"
    to_dev.symlink_to("/dev/null")
    for target in (fifo, to_dev):
        res, _ = run(shell, f"%stance history --csv {target}")
        err = res.error_in_exec
        assert type(err).__name__ == "UsageError", err
        assert "not a regular file" in str(err) and "\n" not in str(err)
        assert str(target) in str(err)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert to_dev.is_symlink() and os.readlink(to_dev) == "/dev/null"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "to_null"]


def test_no_descriptor_leaks_when_an_export_fails(shell, tmp_path, monkeypatch):
    import os

    run(shell, "%%stance -q\nx = 1")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    bad = [tmp_path / "nodir" / "h.csv", tmp_path, fifo]
    for target in bad:  # warm-up: IPython's own first-time descriptors
        run(shell, f"%stance history --csv {target}")
    before = _fds()
    for target in bad:
        res, _ = run(shell, f"%stance history --csv {target}")
        assert type(res.error_in_exec).__name__ == "UsageError"

    def refuse(*args, **kwargs):
        raise OSError(24, "Too many open files")

    for name in ("fdopen", "replace"):
        with monkeypatch.context() as m:
            m.setattr(os, name, refuse)
            res, _ = run(shell, f"%stance history --csv {tmp_path / 'h.csv'}")
        assert "Too many open files" in str(res.error_in_exec), name
    assert _fds() - before == set()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]  # no temp file left


def test_export_keeps_permissions_and_names_the_path(sh, tmp_path):
    import os

    run(sh, "%%stance -q\nx = 1")
    p = tmp_path / "h.csv"
    p.write_text("old")
    os.chmod(p, 0o644)
    run(sh, f"%stance history --csv {p} -q")
    assert oct(p.stat().st_mode & 0o777) == "0o644" and p.read_text().startswith("cell,")
    res, _ = run(sh, f"%stance history --csv {tmp_path}")
    assert str(tmp_path) in str(res.error_in_exec) and ".h" not in str(res.error_in_exec)
    res, _ = run(sh, f"%stance history --json {tmp_path}/nodir/x.json")
    msg = str(res.error_in_exec)
    assert "nodir/x.json" in msg and ".x.json." not in msg
