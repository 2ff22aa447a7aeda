"""The docs build (``make docs``) fails on the mistakes it is there to catch.

``make test`` builds the real site first (``make docs``: Sphinx, warnings as
errors). Here the same ``docs/conf.py`` and its extension build a tiny site in
a temporary folder, once clean (it must pass) and once with a broken internal
link, a page in no table of contents, a link to a missing page and a notebook
stored with an error output (it must fail, naming each).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="pip install -e '.[docs]'")
pytest.importorskip("myst_nb", reason="pip install -e '.[docs]'")

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import stored_outputs  # noqa: E402


def _notebook(error: bool = False, tags: list[str] | None = None, run: bool = True) -> dict:
    out: list[dict] = [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}]
    if error:
        out.append(
            {"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": []}
        )
    return {
        "cells": [
            {"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# A notebook\n"]},
            {
                "cell_type": "code",
                "id": "b",
                "execution_count": 1 if run else None,
                "metadata": {"tags": tags or []},
                "source": ["print('hi')"],
                "outputs": out if run else [],
            },
        ],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python", "pygments_lexer": "ipython3"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_stored_outputs_flags_errors_and_unrun_cells():
    assert stored_outputs.problems(_notebook()) == []
    assert stored_outputs.problems(_notebook(error=True, tags=["raises-exception"])) == []
    (line,) = stored_outputs.problems(_notebook(error=True))
    assert "stored error, ValueError: boom" in line
    (line,) = stored_outputs.problems(_notebook(run=False))
    assert "was not run" in line


def test_every_notebook_is_stored_clean():
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        assert stored_outputs.problems(json.loads(path.read_text())) == [], path.name


def test_notebooks_mark_nbval_cells_with_tags_not_comments():
    """nbval's markers are cell tags (``nbval-check-output``): a ``# NBVAL_...``
    comment would show in every rendered notebook, and a misspelt tag is not read."""
    plugin = pytest.importorskip("nbval.plugin")
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            lines = "".join(cell["source"]).splitlines()
            comments = [
                ln
                for ln in map(str.strip, lines)
                if ln.startswith("#") and ln.lstrip("#").strip() in plugin.comment_markers
            ]
            assert not comments, (path.name, lines[:2])
            tags = cell["metadata"].get("tags", [])
            for tag in tags:
                if tag.startswith("nbval"):
                    assert tag in plugin.metadata_tags, (path.name, tag)


#: The docs' pictures that are screenshots (``make screenshots``: the browser
#: test copies them) or drawn by hand, each with where it comes from; every
#: other picture is a notebook cell's chart (a ``docs-image:NAME.png`` tag).
NOT_FROM_A_NOTEBOOK = {
    "panel.png": "make screenshots",
    "panel-dark.png": "make screenshots",
    "report.png": "make screenshots",
    "diff.png": "make screenshots",
    "tracing-lab.png": "make screenshots",
    "tracing.png": "rep.tracing_figure() of docs/compile-time.md's GPT-2 cell",
}


def test_the_docs_charts_are_the_notebooks_stored_charts():
    """Each chart the docs show is the stored chart of the notebook cell
    tagged ``docs-image:NAME.png`` (``build_tour.py --save`` writes both), so
    a picture cannot keep a label the code no longer draws (the history
    chart said "guards" and "rest of the cell" long after the charts did
    not); a picture with no source fails."""
    sys.path.insert(0, str(ROOT / "notebooks"))
    from build_tour import docs_images

    charts: dict[str, tuple[str, bytes]] = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for name, png in docs_images(json.loads(path.read_text())).items():
            assert name not in charts, f"{name}: tagged in {charts[name][0]} and {path.name}"
            charts[name] = (path.name, png)
    assert {"history.png", "compare.png", "sweep.png", "sweep-memory.png"} <= set(charts)
    for name, (notebook, png) in charts.items():
        picture = DOCS / "images" / name
        assert picture.exists() and picture.read_bytes() == png, (
            f"docs/images/{name} is not {notebook}'s stored chart: "
            "run notebooks/build_tour.py --save"
        )
    pictures = {p.name for p in (DOCS / "images").glob("*.png")}
    unsourced = pictures - set(charts) - set(NOT_FROM_A_NOTEBOOK)
    assert not unsourced, f"pictures no notebook cell or screenshot makes: {sorted(unsourced)}"
    assert not set(charts) & set(NOT_FROM_A_NOTEBOOK)


def test_api_signatures_hide_the_deprecated_catch_all():
    """``measure(**deprecated)`` takes the renamed keywords' old names; the API
    page's signature leaves it out (docs/conf.py's autodoc-process-signature hook)."""
    import importlib.util
    import inspect

    import stance_magic

    spec = importlib.util.spec_from_file_location("stance_magic_docs_conf", DOCS / "conf.py")
    assert spec and spec.loader
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    hide = conf._hide_deprecated_kwargs

    sig = inspect.signature(stance_magic.measure)
    assert "deprecated" in sig.parameters  # still there: the old names warn
    for shown in (
        str(sig.replace(return_annotation=inspect.Signature.empty)),
        "(a=1, **deprecated)",
    ):
        new, _ = hide(None, "function", "stance_magic.measure", None, {}, shown, None)
        assert "deprecated" not in new and new.endswith(")"), new
    assert new == "(a=1)"
    assert hide(None, "function", "f", None, {}, "(a, **kwargs)", None) is None


def _site(tmp_path: Path, broken: bool) -> subprocess.CompletedProcess[str]:
    """A tiny copy of the site: the real conf.py and extension, two pages and a notebook."""
    root = tmp_path / ("broken" if broken else "clean")
    (root / "stance_magic").mkdir(parents=True)
    (root / "stance_magic" / "_version.py").write_text('__version__ = "0.0.0"\n')
    (root / "docs").mkdir()
    shutil.copy(DOCS / "conf.py", root / "docs" / "conf.py")
    shutil.copytree(DOCS / "_ext", root / "docs" / "_ext")
    shutil.copytree(DOCS / "_static", root / "docs" / "_static")
    (root / "notebooks").mkdir()
    nb = _notebook(error=broken)
    (root / "notebooks" / "01_a.ipynb").write_text(json.dumps(nb))
    link = "[a heading](guide.md#no-such-heading)" if broken else "[a heading](guide.md#usage)"
    missing = "[gone](gone.md)" if broken else "[the guide](guide.md)"
    (root / "docs" / "index.md").write_text(
        f"# Site\n\nSee {link} and {missing}.\n\n```{{toctree}}\nguide\nnotebooks/01_a\n```\n"
    )
    (root / "docs" / "guide.md").write_text("# Guide\n\n## Usage\n\nText.\n")
    if broken:
        (root / "docs" / "orphan.md").write_text("# Nobody links here\n")
    cmd = ["-W", "--keep-going", "-E", "-q", "-b", "html", "docs", "build/docs"]
    return subprocess.run(
        [sys.executable, "-m", "sphinx", *cmd],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )


@pytest.mark.integration
def test_docs_build_passes_clean_and_fails_on_each_mistake(tmp_path):
    clean = _site(tmp_path, broken=False)
    assert clean.returncode == 0, clean.stdout
    broken = _site(tmp_path, broken=True)
    assert broken.returncode != 0
    log = broken.stdout
    assert "no-such-heading" in log, log  # a broken anchor
    assert "gone.md" in log, log  # a missing page
    assert "orphan" in log and "toctree" in log, log  # a page nobody can reach
    assert "stored error, ValueError: boom" in log, log  # a notebook's stored error
