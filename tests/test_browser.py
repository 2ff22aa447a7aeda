"""End to end: the panel in JupyterLab, in headless Chromium.

A JupyterLab server (this venv's ``jupyter lab``) runs on a free localhost
port with a token, in a temporary directory holding a generated notebook and
its own Jupyter config, data, settings and workspace folders, set up so that
nothing reaches the network. Playwright drives Debian's Chromium: it runs
the notebook, ticks *watch all cells* and picks a stance in the panel's
dropdown, runs a cell that prints ``stance_magic.current_stance()``, and
checks the printed stance and the live area. A screenshot is saved as
``build/test-artifacts/panel.png``.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "build" / "test-artifacts"
KERNEL = "stance-magic-test"

if not CHROMIUM.exists():
    pytest.skip(
        f"no Chromium at {CHROMIUM}: install it with `apt-get install -y chromium` "
        "to run the browser test",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytest.importorskip("jupyterlab", reason="pip install jupyterlab")
nbformat = pytest.importorskip("nbformat", reason="pip install nbformat")

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

CELLS = [
    "%load_ext stance_magic\n"
    "import torch, stance_magic\n"
    'f = torch.compile(lambda x: x.sin() + 1, backend="eager")',
    "%stance panel",
    'y = f(torch.ones(3))\nprint("STANCE:", stance_magic.current_stance().name)',
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def _jupyter() -> list[str]:
    exe = Path(sys.executable).parent / "jupyter"
    return [str(exe), "lab"] if exe.exists() else [sys.executable, "-m", "jupyterlab"]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A JupyterLab server serving ``panel.ipynb``; yields (base url, token)."""
    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in CELLS],
        metadata={
            "kernelspec": {
                "name": KERNEL,
                "display_name": "stance_magic test",
                "language": "python",
            }
        },
    )
    nbformat.write(nb, root / "panel.ipynb")

    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "MPLBACKEND": "Agg",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    # The kernel: this interpreter, importing stance_magic from this checkout.
    _write_json(
        tmp_path / "data" / "kernels" / KERNEL / "kernel.json",
        {
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "stance_magic test",
            "language": "python",
            "env": {"PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"},
        },
    )
    # No network: no news, no update check, no PyPI extension manager, no LSP scan.
    _write_json(
        tmp_path / "config" / "jupyter_server_config.json",
        {
            "ServerApp": {
                "ip": "127.0.0.1",
                "port": port,
                "port_retries": 0,
                "open_browser": False,
                "root_dir": str(root),
                "terminals_enabled": False,
                "allow_root": True,  # CI runs as root
                "jpserver_extensions": {"jupyter_lsp": False, "jupyter_server_terminals": False},
            },
            "IdentityProvider": {"token": token},
            "LabApp": {
                "news_url": None,
                "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
                "extension_manager": "readonly",
                "expose_app_in_browser": True,
            },
        },
    )
    _write_json(
        tmp_path
        / "settings"
        / "@jupyterlab"
        / "apputils-extension"
        / "notification.jupyterlab-settings",
        {"fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True},
    )

    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(
        [*_jupyter(), "--no-browser"],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited ({proc.returncode}):\n{_tail(tmp_path)}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not start in 60 s:\n{_tail(tmp_path)}")
                time.sleep(0.3)
        yield base, token
    finally:
        try:
            req = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(req, timeout=5).close()
        except OSError:
            pass
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _tail(tmp_path: Path) -> str:
    return (tmp_path / "lab.log").read_text(errors="replace")[-4000:]


KERNEL_IDLE = """() => {
    const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session
        && w.sessionContext.session.kernel;
    return !!k && k.status === 'idle' && !w.sessionContext.pendingInput;
}"""


def test_panel_in_jupyterlab(lab: tuple[str, str]) -> None:
    base, token = lab
    expect = sync_api.expect
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "panel.png"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1300})
            page.set_default_timeout(90_000)
            expect.set_options(timeout=90_000)
            page.goto(f"{base}/lab/tree/panel.ipynb?token={token}&reset")
            page.wait_for_function("() => !!window.jupyterapp", timeout=60_000)
            page.locator(".jp-Notebook .jp-Cell").first.wait_for()
            page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
            page.wait_for_function(KERNEL_IDLE, polling=250)

            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            cells = page.locator(".jp-Notebook .jp-Cell")
            expect(cells.nth(2).locator(".jp-OutputArea")).to_contain_text("STANCE: default")
            panel = page.locator(".sm-panel")
            expect(panel).to_be_visible()
            live = panel.locator(".sm-live")
            expect(live).to_contain_text("No measured cell yet")
            page.wait_for_function(KERNEL_IDLE, polling=250)

            # Drive the panel as a user would: watch all cells, run the cell.
            def run_third_cell() -> None:
                cells.nth(2).locator(".jp-InputArea-editor").click()
                page.keyboard.press("Control+Enter")

            panel.locator(".sm-watch").click()
            expect(panel.locator(".sm-watch.mod-active")).to_be_visible()
            page.wait_for_function(KERNEL_IDLE, polling=250)
            run_third_cell()
            expect(live).to_contain_text("last measured cell 1: ran under default")
            page.wait_for_function(KERNEL_IDLE, polling=250)

            # Pick a stance in the dropdown; the next cell runs under it.
            panel.locator(".sm-stance select").select_option("force_eager")
            expect(panel.locator(".sm-message")).to_contain_text(
                "session stance: force_eager (was: default)"
            )
            page.wait_for_function(KERNEL_IDLE, polling=250)
            run_third_cell()
            expect(cells.nth(2).locator(".jp-OutputArea")).to_contain_text("STANCE: force_eager")
            expect(live).to_contain_text("last measured cell 2: ran under force_eager")
            expect(live.locator("table.sm-report")).to_contain_text("force_eager")
            expect(live.locator("img")).to_be_visible()
            page.wait_for_function(KERNEL_IDLE, polling=250)
            assert panel.locator(".sm-stance select").input_value() == "force_eager"

            panel.scroll_into_view_if_needed()
            page.wait_for_timeout(300)  # let the chart image lay out
            box = panel.bounding_box()
            out = cells.nth(2).bounding_box()
            assert box is not None and out is not None
            assert box["width"] <= 820, box
            top = max(box["y"] - 40, 0)
            page.screenshot(
                path=str(shot),
                clip={
                    "x": 0,
                    "y": top,
                    "width": 900,
                    "height": min(out["y"] + out["height"] + 10, 1300) - top,
                },
            )
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
