"""The Markdown a user reads renders as written: README, changelog, docs pages.

Each file is parsed with markdown-it-py (CommonMark, the parser MyST and the
docs build use) and fails on

- a code fence that is never closed (it swallows the rest of the file);
- a line inside a fenced block that starts with a fence and goes on with
  text (```` ``` The figure is ````): CommonMark does not close a block
  there, so the block runs on to the next bare fence, swallowing the prose
  and headings in between;
- a Markdown heading (``## ...``) inside a fenced block whose info string is
  empty or ``markdown``: a section that renders as code.

The README's links into this repository (GitHub and raw URLs, which work on
GitHub and on PyPI alike) must name files that exist, the README stays a
user's page: short, and every ``python`` block of the README and the docs
pastes as notebook cells (a cell magic only on a cell's first line).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

markdown_it = pytest.importorskip("markdown_it", reason="pip install markdown-it-py")

ROOT = Path(__file__).resolve().parent.parent
FILES = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
FENCE_WITH_TEXT = re.compile(r"^\s{0,3}(`{3,}|~{3,})[^`~]*\S.*$")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S")
MARKDOWN_INFO = {"", "markdown", "md"}


def problems(text: str) -> list[str]:
    """What is wrong with the fences of a Markdown document, one line each."""
    md = markdown_it.MarkdownIt("commonmark")
    lines = text.splitlines()
    found = []
    for tok in md.parse(text):
        if tok.type != "fence" or tok.map is None:
            continue
        start, end = tok.map
        info = tok.info.strip()
        last = lines[end - 1].strip() if end - 1 > start else ""
        closed = end - 1 > start and last.startswith(tok.markup) and set(last) <= set(tok.markup)
        if not closed:
            found.append(f"line {start + 1}: the ```{info} fence is never closed")
        body = tok.content.splitlines()
        for n, line in enumerate(body, start + 2):
            m = FENCE_WITH_TEXT.match(line)
            if m and m.group(1)[0] == tok.markup[0] and len(m.group(1)) >= len(tok.markup):
                found.append(
                    f"line {n}: {line.strip()[:40]!r} inside the ```{info} block opened "
                    f"at line {start + 1}: a fence followed by text does not close a block"
                )
            if info.lower() in MARKDOWN_INFO and HEADING.match(line):
                found.append(
                    f"line {n}: heading {line.strip()[:40]!r} inside the code block "
                    f"opened at line {start + 1}"
                )
    return found


def test_the_checks_catch_each_mistake():
    unclosed = "# A\n\n```python\nx = 1\n\n## B\n"
    assert any("never closed" in p for p in problems(unclosed))
    # the README's old mistake: a closing fence with the next sentence after it
    glued = "```bash\nmake x\n``` The figure is\nnamed.\n\n## Why\n\n```text\nout\n```\n"
    assert any("does not close" in p for p in problems(glued))
    heading = "```\n## not a heading\n```\n"
    assert any("heading" in p for p in problems(heading))
    fine = "# A\n\n```bash\n## a bash comment\nmake\n```\n\n````md\n```python\nx\n```\n````\n"
    assert problems(fine) == [], problems(fine)


def test_a_fence_line_with_text_that_swallows_a_heading_is_caught():
    # "``` The figure is" does not close the bash block: the heading after it
    # would render as code
    old = (
        "Lookups.\n\n```bash\n.venv/bin/python benchmarks/bench_nested.py\n"
        "``` The figure is\nnamed *cache lookups*.\n\n"
        "## Why it recompiled: causes\n\ntext\n\n```text\nIn [5]: x\n```\n"
    )
    assert problems(old)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fences_close_and_hold_no_headings(path: Path):
    assert path.is_file(), path
    assert problems(path.read_text()) == []


REPO_URL = re.compile(
    r"https://(?:github\.com/stance-magic/stance_magic/(?:blob|tree)/main|"
    r"raw\.githubusercontent\.com/stance-magic/stance_magic/main)/([^)\s#?\"']+)"
)


def test_readme_links_into_the_repository_name_files_that_exist():
    text = (ROOT / "README.md").read_text()
    paths = REPO_URL.findall(text)
    assert paths, "the README links to the docs"
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, missing
    assert any(p.startswith("docs/images/") for p in paths), "a picture"


def test_readme_is_a_users_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    for needle in ("pip install stance_magic", "make tour", "make test", "%load_ext stance_magic"):
        assert needle in text, needle
    # measurement logs belong in git history, not in what a user reads first
    assert not re.search(r"\b(commit [0-9a-f]{7}|20\d\d-\d\d-\d\d)\b", text)
    assert "the main before" not in text and "Before this rework" not in text


def test_readme_code_blocks_paste_as_cells():
    text = (ROOT / "README.md").read_text()
    pages = [text] + [p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))]
    blocks = [b for page in pages for b in re.findall(r"```python\n(.*?)```", page, flags=re.S)]
    assert blocks
    for block in blocks:
        lines = block.splitlines()
        # a cell magic works only on the first line of a cell: one block per cell
        # (or on the first line of the body of another cell magic: %%px runs
        # its body, %%stance first, on the engines)
        body = lines[2:] if lines and lines[0].startswith("%%px") else lines[1:]
        assert not [ln for ln in body if ln.startswith("%%")], block
    assert "first Inductor compile" in text and "20–30 s" in text
