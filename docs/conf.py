"""Sphinx configuration for the stance_magic documentation (``make docs``).

Markdown pages (MyST), the notebooks under ``notebooks/`` rendered from their
stored outputs (myst-nb; ``make test`` executes them under nbval), an API
reference from the docstrings (autodoc; numpydoc sections through napoleon's parser), the
PyData theme. Built with warnings as errors.

Sphinx reads only files under ``docs/``, so the notebooks are copied to
``docs/notebooks/`` (ignored by git) when the build starts; a copy whose
notebook is gone is removed.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(ROOT))


def _sync_notebooks() -> None:
    src, dest = ROOT / "notebooks", HERE / "notebooks"
    dest.mkdir(exist_ok=True)
    wanted = {p.name: p for p in src.glob("[0-9][0-9]_*.ipynb")}
    for old in dest.glob("*.ipynb"):
        if old.name not in wanted:
            old.unlink()
    for name, path in wanted.items():
        copy = dest / name
        if not copy.exists() or copy.read_bytes() != path.read_bytes():
            shutil.copy2(path, copy)


_sync_notebooks()


def _version() -> str:
    text = (ROOT / "stance_magic" / "_version.py").read_text()
    m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    assert m, "stance_magic/_version.py has no __version__"
    return m.group(1)


project = "stance_magic"
author = "stance_magic developers"
copyright = "stance_magic developers"
release = version = _version()

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "stored_outputs",
]

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = [
    "_build",
    "**/.ipynb_checkpoints",
]

# MyST: anchors for headings down to ###, so that page.md#a-heading links are
# checked; ::: fences for admonitions.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# The notebooks are rendered as stored: make test executes each of them, and
# the stored_outputs extension fails the build on a stored error.
nb_execution_mode = "off"
nb_output_stderr = "show"
nb_merge_streams = True

# The API reference: the package's public names, numpydoc docstrings.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True

html_theme = "pydata_sphinx_theme"
html_title = "stance_magic"
html_static_path = ["_static"]
html_css_files = ["stance_magic.css"]
html_theme_options = {
    "github_url": "https://github.com/stance-magic/stance_magic",
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    "navbar_align": "left",
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
# Pages without sub-pages get no (empty) left column: reports need the width.
html_sidebars = {
    "**": ["sidebar-nav-bs"],
    "index": [],
    "getting-started": [],
    "api": [],
    "changelog": [],
}
html_show_sourcelink = False

# The public names of stance_magic.report's module page: its dataclasses.
_PUBLIC_ELSEWHERE = {"CellReport"}  # documented as stance_magic.CellReport


def _report_members(app, what, name, obj, skip, options):  # type: ignore[no-untyped-def]
    """On the ``stance_magic.report`` page keep the report dataclasses only
    (the module also holds the builder, which is not public API)."""
    module = getattr(obj, "__module__", None) or ""
    if what != "module" or not (module + ".").startswith("stance_magic.report."):
        return None
    if name in _PUBLIC_ELSEWHERE:
        return True
    return not (isinstance(obj, type) and dataclasses.is_dataclass(obj))


def _numpydoc(app, what, name, obj, options, lines):  # type: ignore[no-untyped-def]
    """Numpydoc sections (Parameters, Examples, ...) through napoleon, for
    functions and classes only: a dataclass field's ``#:`` comment is prose
    (``None: no graph reached a backend``), which napoleon would read as
    ``type: description``."""
    if what in ("attribute", "data", "property"):
        return
    from sphinx.ext.napoleon import Config, NumpyDocstring

    config = Config(napoleon_numpy_docstring=True, napoleon_google_docstring=False)
    lines[:] = NumpyDocstring(lines, config, app, what, name, obj, options).lines()


# A ``**deprecated`` catch-all (``measure(**deprecated)``: the earlier names of
# renamed keywords, which warn and are handed on) is not API to show: a variadic
# keyword parameter is always the signature's last, so it goes up to the ")".
_DEPRECATED_KWARGS = re.compile(r"(?:,\s*|(?<=\())\*\*deprecated\b.*\)$")


def _hide_deprecated_kwargs(app, what, name, obj, options, signature, return_annotation):  # type: ignore[no-untyped-def]
    """Drop a ``**deprecated`` parameter from a rendered signature."""
    if not signature or "**deprecated" not in signature:
        return None
    shown = _DEPRECATED_KWARGS.sub(")", signature)
    # a bare "*" left last (keyword-only marker with no keywords after it)
    return re.sub(r"(?:,\s*|(?<=\())\*\)$", ")", shown), return_annotation


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("autodoc-skip-member", _report_members)
    app.connect("autodoc-process-docstring", _numpydoc)
    app.connect("autodoc-process-signature", _hide_deprecated_kwargs)
