"""The docs pages' own tables fit the article at 1000 and 1300 px wide.

The real site is built (Sphinx, as ``make docs``) into a temporary folder and
each page holding a Markdown table is opened in headless Chromium: no table may
be wider than its (scrolling) container, which would hide its last column past
a scroll bar (the recompiles page's traps table did, at 1300 px: the theme's
two sidebars leave the article 640 px). Reports stored in the notebooks'
outputs are not the pages' tables and are not checked here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.integration]

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")

pytest.importorskip("sphinx", reason="pip install -e '.[docs]'")
pytest.importorskip("myst_nb", reason="pip install -e '.[docs]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
if not CHROMIUM.exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (make browser)", allow_module_level=True)

#: Each page table wider than its container: [width, container width, first header].
OVERFLOWING = """() => [...document.querySelectorAll('article table.table')]
  .filter(t => !t.closest('.cell_output'))
  .map(t => [t.scrollWidth, (t.closest('.pst-scrollable-table-container') || t.parentElement)
             .clientWidth, t.rows[0].cells[0].innerText.trim()])
  .filter(([w, c]) => w > c + 1)"""


def test_page_tables_fit_at_1000_and_1300_px(tmp_path):
    out = tmp_path / "docs"
    cmd = [sys.executable, "-m", "sphinx", "-E", "-q", "-b", "html", "docs", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=600)
    pages = [p for p in sorted(out.rglob("*.html")) if 'class="table' in p.read_text("utf-8")]
    assert any(p.name == "recompiles.html" for p in pages), pages
    wide = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            for width in (1000, 1300):
                page = browser.new_page(viewport={"width": width, "height": 900})
                for path in pages:
                    page.goto(path.as_uri())
                    for table in page.evaluate(OVERFLOWING):
                        wide.append((width, path.relative_to(out).as_posix(), table))
                page.close()
        finally:
            browser.close()
    assert not wide, wide
