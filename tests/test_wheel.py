"""The release a user installs: build it, check it, install it, run it.

1. ``python -m build`` makes the sdist and, from it, the wheel;
   ``twine check --strict`` passes both (the long description renders on PyPI).
2. Their contents: LICENSE in both, CHANGELOG.md in the sdist, the README as the
   long description, one version (``stance_magic/_version.py``'s), the
   panel's and the charts' packages required, torch required as ``>=2.8`` and
   left to the user, the project URLs and classifiers.
3. A fresh venv of this Python with the wheel installed, not editable, with its
   dependencies from the package index, beside the tested torch: the torch of
   this test run (and its own dependencies) reached through a ``.pth`` file,
   so nothing downloads or unpacks torch again (pip sees it installed).
4. A short notebook run in that venv through a real kernel (nbclient):
   ``%load_ext stance_magic`` from site-packages, a ``%%stance`` cell's report
   with its chart (a PNG), the panel (its widget view and the stored widget
   state), and ``%stance?``'s help (the pager payload of the reply).

And, without building anything: the files pyproject.toml names exist.

Slow (a build and a venv's installs): about a minute; the pyproject check is
instant and is not marked slow.
"""

from __future__ import annotations

import base64
import email
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("build", reason="pip install build")
pytest.importorskip("twine", reason="pip install twine")
nbformat = pytest.importorskip("nbformat", reason="pip install nbformat")
nbclient = pytest.importorskip("nbclient", reason="pip install nbclient")

ROOT = Path(__file__).resolve().parent.parent
KERNEL = "stance-magic-wheel"
VERSION = re.search(
    r'^__version__ = "([^"]+)"', (ROOT / "stance_magic" / "_version.py").read_text(), re.M
).group(1)  # type: ignore[union-attr]


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> str:
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


def _tested_torch(dest: Path) -> str:
    """A folder holding (as links) this run's torch and the packages it needs.

    Returns torch's version. The folder goes on the new venv's path through a
    ``.pth`` file: its own site-packages come first, so a package the wheel
    brings in wins; pip reads the distributions on the path, sees torch
    installed, and leaves it (it never uninstalls outside its venv).
    """
    from packaging.requirements import Requirement  # build's own dependency

    dest.mkdir()
    todo, seen = ["torch"], set()
    while todo:
        dist = md.distribution(todo.pop())
        name = dist.metadata["Name"].lower().replace("_", "-")
        if name in seen or name in ("pip", "setuptools"):
            continue  # the venv has its own
        seen.add(name)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
        tops = {f.parts[0] for f in dist.files or []} - {"..", "__pycache__"}
        for top in sorted(tops):
            src = Path(dist.locate_file(top))
            if src.exists() and not top.endswith(".pth") and not (dest / top).exists():
                (dest / top).symlink_to(src)
    assert "torch" in seen
    return md.version("torch")


def test_pyproject_names_files_that_exist():
    text = (ROOT / "pyproject.toml").read_text()
    named = re.findall(r"\(([\w./-]+\.txt)\)", text)
    assert named
    for name in named:
        assert (ROOT / name).is_file(), name


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], ROOT, timeout=600)
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    text = _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)], out)
    assert text.count("PASSED") == 2, text
    return {"wheel": wheel, "sdist": sdist}


@pytest.mark.slow
def test_the_wheel_and_sdist_say_what_is_true(dists: dict[str, Path]) -> None:
    with zipfile.ZipFile(dists["wheel"]) as whl:
        names = whl.namelist()
        info = f"stance_magic-{VERSION}.dist-info"
        meta = email.message_from_string(whl.read(f"{info}/METADATA").decode())
        assert f"{info}/licenses/LICENSE" in names
        assert "stance_magic/py.typed" in names
        assert not [n for n in names if n.startswith(("tests/", "docs/", "notebooks/"))]
    assert meta["Version"] == VERSION
    assert meta["License-Expression"] == "BSD-3-Clause"
    assert meta.get_payload().strip() == (ROOT / "README.md").read_text().strip()
    assert meta["Description-Content-Type"].startswith("text/markdown")
    requires = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert sorted(re.split(r"[<>=;\s]", r)[0] for r in requires) == [
        "ipython",
        "ipywidgets",
        "matplotlib",
        "torch",
    ], requires
    assert "torch>=2.8" in requires, "torch is the user's own, from 2.8"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    for key in ("Documentation", "Source", "Issues"):
        assert urls[key].startswith("https://github.com/stance-magic/stance_magic"), urls
    classifiers = meta.get_all("Classifier")
    for c in (
        "License :: OSI Approved :: BSD License",
        "Operating System :: OS Independent",
        "Framework :: IPython",
        "Framework :: Jupyter",
        "Typing :: Typed",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.13",
    ):
        assert c in classifiers, c
    assert [c for c in classifiers if c.startswith("Development Status")]
    with tarfile.open(dists["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for name in ("LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml", "docs/conf.py"):
        assert name in names, name
    assert "stance_magic/__init__.py" in names and "notebooks/01_tour.ipynb" in names
    assert "BSD 3-Clause" in (ROOT / "LICENSE").read_text()
    assert f"## [{VERSION}]" in (ROOT / "CHANGELOG.md").read_text()


CELLS = [
    "%load_ext stance_magic\n"
    "import json, torch, stance_magic\n"
    "print(json.dumps({'pkg': stance_magic.__file__, 'torch': torch.__version__,\n"
    "                  'version': stance_magic.__version__}))",
    'f = torch.compile(lambda x: x.sin() + 1, backend="eager")',
    "%%stance default\ny = f(torch.ones(3))\ny = f(torch.ones(4, 2))",
    "p = stance_magic.panel()\np",
    "%stance?",
]
IMPORTS, DEFINE, MEASURED, PANEL, HELP = range(len(CELLS))


@pytest.mark.slow
def test_the_wheel_installs_and_runs_in_a_fresh_venv(
    dists: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, timeout=120)
    py = venv / "bin" / "python"
    site = Path(
        _run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp_path)
        .strip()
        .splitlines()[-1]
    )
    torch_version = _tested_torch(tmp_path / "tested-torch")
    (site / "tested_torch.pth").write_text(f"{tmp_path / 'tested-torch'}\n")

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "JUPYTER_PATH")
    }
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1")
    # the wheel as a user installs it (not editable), with ipykernel for the kernel
    _run([str(py), "-m", "pip", "install", "-q", str(dists["wheel"]), "ipykernel"], tmp_path, env)
    assert not (site / "torch").exists(), "pip left the tested torch where it is"
    assert not list(site.glob("__editable__*")) and not list(site.glob("*.egg-link"))
    _run([str(py), "-m", "pip", "check"], tmp_path, env)

    # a kernel of that venv, found through a kernelspec of its own
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "stance_magic wheel",
                "language": "python",
                "env": {"PYTHONNOUSERSITE": "1"},
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    work = tmp_path / "work"  # not the repository: `import stance_magic` must find the wheel
    work.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    replies: dict[int, Any] = {}

    def keep_reply(cell: Any, cell_index: int, execute_reply: Any) -> None:
        replies[cell_index] = execute_reply

    nbclient.NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=300,
        resources={"metadata": {"path": str(work)}},
        store_widget_state=True,
        on_cell_executed=keep_reply,
    ).execute()
    outs = [c.outputs for c in nb.cells]

    # %load_ext: the installed package, beside the tested torch
    printed = json.loads("".join(o.get("text", "") for o in outs[IMPORTS]).strip())
    assert Path(printed["pkg"]).parent == site / "stance_magic", printed
    assert printed["torch"] == torch_version and printed["version"] == VERSION, printed

    # a %%stance cell: the report as text and HTML, and its chart as a PNG
    data = [o.get("data", {}) for o in outs[MEASURED]]
    report = [d for d in data if d.get("text/plain", "").startswith("stance_magic · ")]
    assert report and "<table" in report[0]["text/html"], data
    text = report[0]["text/plain"]
    assert re.search(r"^  recompiles +1$", text, re.MULTILINE), text
    pngs = [base64.b64decode(d["image/png"]) for d in data if "image/png" in d]
    assert pngs and pngs[0].startswith(b"\x89PNG\r\n\x1a\n"), "a chart"

    # the panel: a widget view, and its state stored with the notebook
    (view,) = [
        o["data"]["application/vnd.jupyter.widget-view+json"]
        for o in outs[PANEL]
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert view["model_id"] in state
    dropdowns = [m["state"] for m in state.values() if m["model_name"] == "DropdownModel"]
    assert any("eager_then_compile" in d.get("_options_labels", []) for d in dropdowns), dropdowns

    # %stance?: IPython's pager payload, the magic's docstring and its options
    pages = [p for p in replies[HELP]["content"].get("payload", []) if p.get("source") == "page"]
    assert pages, replies[HELP]
    help_text = pages[0]["data"]["text/plain"]
    assert "Run a cell, or the session, under a torch.compile stance." in help_text
    assert "--compare" in help_text and "%stance panel" in help_text
