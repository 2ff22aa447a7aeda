"""binder/ cannot rot: build its environment in a fresh venv and run the tour in it.

What Binder (repo2docker) does with this repository, done here from the files
under ``binder/`` alone, in a copy of the repository (its tracked files and
the untracked ones git does not ignore):

1. ``pip install -r binder/requirements.txt`` from the repository root,
   into a new virtual environment of this Python;
2. ``binder/postBuild`` (bash, from the repository root, that environment's
   ``pip`` first on PATH);
3. then, in that environment: torch is the pinned CPU build, stance_magic
   imports from site-packages (not from the copy), JupyterLab has the widget
   extension, and ``notebooks/01_tour.ipynb`` (where Binder opens) executes
   without an error.

One line may differ from Binder: a package index that this machine cannot
reach (only PyPI is reachable here, not download.pytorch.org) is dropped and
plain PyPI used instead; ``pip install torch==2.13.0`` then takes the CPU
build from this machine's wheel cache. The test says so in its output. Set
``BINDER_TEST_KEEP_INDEX=1`` on a machine that reaches every index to run the
file unchanged.

Slow (a fresh venv and its installs, then the tour): a few minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
TOUR = "notebooks/01_tour.ipynb"
#: Package indexes this machine cannot reach (only PyPI is reachable here).
UNREACHABLE = ("download.pytorch.org",)
INDEX_OPTION = re.compile(r"^\s*--(extra-)?index-url[\s=]+(\S+)")


def _say(request: pytest.FixtureRequest, line: str) -> None:
    """A line in pytest's own output (shown even when output is captured)."""
    plugins = request.config.pluginmanager
    reporter = plugins.get_plugin("terminalreporter")
    capture = plugins.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(f"test_binder: {line}")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-6000:]}")
    return proc.stdout


def _copy_repo(dest: Path) -> None:
    """The files Binder would see: tracked ones and untracked non-ignored ones."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        check=True,
    ).stdout
    for rel in filter(None, out.decode().split("\0")):
        src = ROOT / rel
        if not src.is_file():  # deleted in the work tree
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def _requirements_for_here(text: str) -> tuple[str, list[str]]:
    """binder/requirements.txt, less the index lines this machine cannot reach."""
    if os.environ.get("BINDER_TEST_KEEP_INDEX") == "1":
        return text, []
    kept, dropped = [], []
    for line in text.splitlines():
        m = INDEX_OPTION.match(line)
        if m and any(host in m.group(2) for host in UNREACHABLE):
            dropped.append(line.strip())
            continue
        kept.append(line)
    return "\n".join(kept) + "\n", dropped


def test_binder_files_are_complete():
    """The files repo2docker reads, each in the form it expects."""
    assert re.fullmatch(r"python-3\.\d+\n?", (BINDER / "runtime.txt").read_text())
    reqs = (BINDER / "requirements.txt").read_text()
    assert re.search(r"^torch==2\.13\.0$", reqs, re.M), "torch pinned to the tested release"
    assert re.search(r"^--extra-index-url https://download\.pytorch\.org/whl/cpu$", reqs, re.M)
    assert re.search(r"^ipywidgets>=8", reqs, re.M), "ipywidgets 8 ships the lab extension"
    post = (BINDER / "postBuild").read_text().splitlines()
    assert post[0].startswith("#!") and "set -e" in [ln.strip() for ln in post]
    assert os.access(BINDER / "postBuild", os.X_OK), "repo2docker runs postBuild as a program"
    assert (ROOT / TOUR).is_file()


def test_binder_environment_runs_the_tour(tmp_path, request):
    t_start = time.perf_counter()
    repo = tmp_path / "repo"
    _copy_repo(repo)
    venv = tmp_path / "venv"
    bin_dir = venv / "bin"

    reqs, dropped = _requirements_for_here((repo / "binder" / "requirements.txt").read_text())
    for line in dropped:
        _say(
            request,
            f"binder/requirements.txt line {line!r} names an index this machine cannot "
            "reach; installing from plain PyPI instead (torch==2.13.0 comes from this "
            "machine's local CPU wheel)",
        )
    local_reqs = tmp_path / "requirements-here.txt"
    local_reqs.write_text(reqs)

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "JUPYTER_PATH")
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["JUPYTER_PATH"] = str(venv / "share" / "jupyter")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONNOUSERSITE"] = "1"

    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env, 120)
    # 1. what repo2docker runs first, from the repository root
    _run(
        [str(bin_dir / "pip"), "install", "-q", "-r", str(local_reqs)],
        repo,
        env,
        600,
    )
    # 2. postBuild, from the repository root, as a program (its shebang: bash)
    _run([str(repo / "binder" / "postBuild")], repo, env, 300)
    t_built = time.perf_counter()

    # 3. the environment: CPU torch, the installed package, the widget extension
    probe = (
        "import json, os, torch, stance_magic, ipywidgets, matplotlib;"
        "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda,"
        "'pkg': os.path.dirname(stance_magic.__file__), 'widgets': ipywidgets.__version__}))"
    )
    info = json.loads(_run([str(bin_dir / "python"), "-c", probe], tmp_path, env, 120).strip())
    assert info["torch"].split("+")[0] == "2.13.0"
    assert info["cuda"] is None, "the CPU build of torch"
    assert Path(info["pkg"]).is_relative_to(venv), "stance_magic installed, not run from the copy"
    assert int(info["widgets"].split(".")[0]) >= 8
    labext = (
        venv / "share" / "jupyter" / "labextensions" / "@jupyter-widgets" / "jupyterlab-manager"
    )
    assert labext.is_dir(), "JupyterLab's widget extension (from ipywidgets >= 8)"
    assert (bin_dir / "jupyter-lab").exists()

    # 4. the tour, executed in that environment (where Binder opens)
    out_dir = tmp_path / "executed"
    _run(
        [
            str(bin_dir / "jupyter"),
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--ExecutePreprocessor.timeout=600",
            "--ExecutePreprocessor.kernel_name=python3",
            "--output-dir",
            str(out_dir),
            TOUR,
        ],
        repo,
        env,
        600,
    )
    nb = json.loads((out_dir / Path(TOUR).name).read_text())
    errors = [
        o.get("ename")
        for c in nb["cells"]
        if c["cell_type"] == "code" and "raises-exception" not in c["metadata"].get("tags", [])
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors, f"cells raised: {errors}"
    reports = sum(
        "stance_magic · " in "".join(o.get("data", {}).get("text/plain", ""))
        for c in nb["cells"]
        for o in c.get("outputs", [])
    )
    assert reports >= 5, "the tour shows its reports"
    t_end = time.perf_counter()
    _say(
        request,
        f"built the Binder environment in {t_built - t_start:.0f} s and ran the tour in it "
        f"in {t_end - t_built:.0f} s (torch {info['torch']})",
    )
