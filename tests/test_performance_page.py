"""docs/performance.md's figures, and the README's, are the committed benchmark
JSON's, rendered.

``benchmarks/perf_page.py`` renders every block between ``<!-- perf:NAME:begin -->``
and ``<!-- perf:NAME:end -->`` from ``benchmarks/results/*.json``; these tests run
it in check mode (no benchmark runs, no torch import) and fail when a block on the
page differs from what the committed JSON renders to.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "perf_page.py"


def _perf_page():
    spec = importlib.util.spec_from_file_location("perf_page", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_page_matches_the_committed_json():
    pp = _perf_page()
    bad = pp.stale(pp.PAGE.read_text("utf-8"))
    assert not bad, (
        "docs/performance.md: these generated blocks differ from what "
        "benchmarks/results/*.json renders to: "
        + ", ".join(f"perf:{n} (from {pp.BLOCKS[n][0]}.json)" for n in bad)
        + f"; fix: {pp.FIX}, or retake the figures with make perf-page"
    )


def test_every_block_has_its_json_and_says_how_it_was_taken():
    pp = _perf_page()
    for name, (stem, _) in pp.BLOCKS.items():
        data = json.loads((pp.RESULTS / f"{stem}.json").read_text("utf-8"))
        for key in ("platform", "python", "torch", "cpus"):
            assert key in data["env"], (stem, key)
        assert data["command"].startswith(f".venv/bin/python benchmarks/bench_{stem}.py")
        assert data["seconds"] > 0
        block = pp.render_block(name)
        if name not in pp.BARE:
            assert data["command"] in block and data["env"]["torch"] in block, name


def test_a_changed_figure_is_caught_and_written_back(tmp_path):
    """Edit a JSON figure: the check names the block; --write makes the page agree."""
    pp = _perf_page()
    results = tmp_path / "results"
    shutil.copytree(pp.RESULTS, results)
    path = results / "memory.json"
    data = json.loads(path.read_text("utf-8"))
    data["workloads"][0]["events"] += 1000
    path.write_text(json.dumps(data), "utf-8")
    page = pp.PAGE.read_text("utf-8")
    assert pp.stale(page, results) == ["memory"]
    assert pp.stale(pp.render(page, results), results) == []
    assert pp.render(page) == page  # rendering the committed JSON changes nothing


def test_the_check_mode_exits_1_and_names_the_fix(tmp_path, capsys):
    pp = _perf_page()
    page = tmp_path / "performance.md"
    text = pp.PAGE.read_text("utf-8")
    begin, end = pp.markers("hooks")
    head, rest = text.split(begin, 1)
    page.write_text(f"{head}{begin}\n| typed | by hand |\n{end}{rest.split(end, 1)[1]}", "utf-8")
    assert pp.main(["--check", "--page", str(page)]) == 1
    out = capsys.readouterr().out
    assert "perf:hooks" in out and "make perf-page-render" in out
    assert pp.main(["--check"]) == 0


def test_the_readmes_cost_sentence_is_the_performance_pages_figures():
    """The README's figures are rendered from the same JSON as the page's
    summary (no number typed by hand): the check fails on a figure edited in
    the README, and names the fix."""
    pp = _perf_page()
    names = pp.PAGES[pp.README]
    text = pp.README.read_text("utf-8")
    assert pp.stale(text, names=names) == []
    block = pp.blocks_of(text, names)["readme-cost"]
    summary = pp.blocks_of(pp.PAGE.read_text("utf-8"))["summary"]
    # the same two figures, in both
    figures = [w for w in block.replace("\n", " ").split() if w[0].isdigit()]
    assert len(figures) == 2 and all(f in summary.replace("\n", " ") for f in figures)
    edited = text.replace(block, block.replace(figures[0], "160", 1))
    assert pp.stale(edited, names=names) == ["readme-cost"]
    assert pp.render(edited, names=names) == text
