"""The README's Python example prints what its comment says (run as a user
pastes it: a fresh namespace, the real Inductor backend)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import torch

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_example() -> str:
    text = README.read_text()
    after = text.split("In Python, without IPython:", 1)[1]
    (block,) = re.findall(r"```python\n(.*?)```", after, flags=re.S)[:1]
    return block


@pytest.mark.inductor
def test_the_readme_python_example_prints_what_it_says():
    block = _python_example()
    printed = re.search(r"^print\(.*\)\s+#\s*(.+)$", block, flags=re.M)
    assert printed, "the example says what it prints, in a comment after its print()"
    torch.compiler.reset()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {})
    assert out.getvalue().strip() == printed.group(1).strip()
