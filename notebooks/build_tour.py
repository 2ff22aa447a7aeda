"""Run the tour notebook headless and write it as one HTML page (``make tour``).

Usage::

    python notebooks/build_tour.py            # run 01_tour.ipynb, write build/tour.html
    python notebooks/build_tour.py --save     # run every notebook here, save outputs in place

The first form executes ``notebooks/01_tour.ipynb`` in a fresh kernel of this
Python (nbclient), writes the executed notebook to ``build/tour.ipynb`` and
an HTML page with every report and chart embedded to ``build/tour.html``
(nbconvert's ``HTMLExporter``), then prints the page's path and the tour's
summary table (the output of the cell tagged ``summary``, a
``%stance history``), so that the project shows what it does without a
browser. The notebooks under ``notebooks/`` are left untouched.

``--save`` executes the given notebooks (all ``NN_*.ipynb`` by default) and
writes their outputs back into the files, as they are committed; nbval then
checks fresh runs of the cells tagged ``nbval-check-output`` against them
(``make test``). Cell metadata, tags included, is kept as it is. A cell
tagged ``docs-image:NAME.png`` is the source of the docs' picture
``docs/images/NAME.png``: ``--save`` writes the cell's chart there too, so
the docs show the charts of the code as it is (``tests/test_docs.py`` checks
that each such picture is its cell's stored chart).
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOUR = HERE / "01_tour.ipynb"
SUMMARY_TAG = "summary"
#: ``docs-image:NAME.png``: the cell whose chart is the docs' picture NAME.png
IMAGE_TAG = "docs-image:"
IMAGES = ROOT / "docs" / "images"
KERNEL = "python3"


def _use_this_python() -> None:
    """Make the kernel this interpreter's: its own kernelspec comes first, and
    jupyter_client runs a ``python`` kernelspec with ``sys.executable``."""
    share = str(Path(sys.prefix) / "share" / "jupyter")
    paths = os.environ.get("JUPYTER_PATH", "")
    if share not in paths.split(os.pathsep):
        os.environ["JUPYTER_PATH"] = share + (os.pathsep + paths if paths else "")


def execute(path: Path, timeout: int = 600, verbose: bool = False) -> tuple[object, float]:
    """Execute a notebook in a fresh kernel, its folder as working directory.

    Returns the executed notebook and the seconds it took. A cell that raises
    stops the run (``CellExecutionError``) unless it is tagged
    ``raises-exception``. The kernel's own stderr (its start-up chatter; what
    cells print lands in the notebook) is shown only when ``verbose``.
    """
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
    )
    t0 = time.perf_counter()
    client.execute(**({} if verbose else {"stderr": subprocess.DEVNULL}))
    return nb, time.perf_counter() - t0


def output_text(cell: object) -> str:
    """The text/plain of a code cell's results (execute_result or display)."""
    parts = []
    for out in cell.get("outputs", []):
        if "image/png" in out.get("data", {}):
            continue  # a chart's text stand-in
        if out.get("output_type") in ("execute_result", "display_data"):
            text = out.get("data", {}).get("text/plain")
            if text:
                parts.append(text if isinstance(text, str) else "".join(text))
        elif out.get("output_type") == "stream" and out.get("name") == "stdout":
            parts.append(out.get("text", ""))
    return "\n".join(p.rstrip("\n") for p in parts)


def summary_table(nb: object) -> str:
    """The tour's summary: the output of the cell tagged ``summary``, else of
    the last ``%stance history`` cell."""
    cells = [c for c in nb.cells if c.cell_type == "code"]
    tagged = [c for c in cells if SUMMARY_TAG in c.get("metadata", {}).get("tags", [])]
    if not tagged:
        tagged = [c for c in cells if c.source.lstrip().startswith("%stance history")]
    return output_text(tagged[-1]) if tagged else ""


def count_images(nb: object) -> int:
    return sum(
        1
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    )


def docs_images(nb: object) -> dict[str, bytes]:
    """The docs' pictures a notebook holds: for each code cell tagged
    ``docs-image:NAME.png``, its first chart (PNG bytes), by NAME.png. A
    tagged cell without a chart raises: the picture would go stale."""
    out = {}
    for c in nb["cells"]:
        tags = c.get("metadata", {}).get("tags", [])
        names = [t[len(IMAGE_TAG) :] for t in tags if t.startswith(IMAGE_TAG)]
        if not names:
            continue
        pngs = [
            o["data"]["image/png"] for o in c.get("outputs", []) if "image/png" in o.get("data", {})
        ]
        if not pngs:
            raise ValueError(f"the cell tagged {IMAGE_TAG}{names[0]} has no chart")
        data = pngs[0] if isinstance(pngs[0], str) else "".join(pngs[0])
        for name in names:
            out[name] = base64.b64decode(data)
    return out


def write_html(nb: object, target: Path) -> Path:
    """The executed notebook as one self-contained page (images inline)."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    exporter.embed_images = True
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": "stance_magic tour"}})
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")
    return target


def build(out_dir: Path, timeout: int, verbose: bool) -> int:
    import nbformat

    print(f"running {TOUR.relative_to(ROOT)} headless (a fresh kernel; a minute or so) ...")
    nb, seconds = execute(TOUR, timeout, verbose)
    out_dir.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out_dir / "tour.ipynb")
    page = write_html(nb, out_dir / "tour.html")
    size = page.stat().st_size / 1024
    print(f"ran in {seconds:.0f} s; {count_images(nb)} charts")
    print(f"wrote {page}  ({size:.0f} KiB; open it in a browser: file://{page})")
    print(f"wrote {out_dir / 'tour.ipynb'}  (the executed notebook)")
    table = summary_table(nb)
    if table:
        print("\nWhat the tour measured (%stance history, one row per measured cell):\n")
        print(table)
    return 0


def save(paths: list[Path], timeout: int, verbose: bool) -> int:
    import nbformat

    for path in paths:
        nb, seconds = execute(path, timeout, verbose)
        nbformat.write(nb, path)
        print(f"{path.relative_to(ROOT)}: ran in {seconds:.0f} s, outputs saved")
        for name, png in docs_images(nb).items():
            (IMAGES / name).write_bytes(png)
            print(f"  wrote docs/images/{name} (its chart)")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "build", help="output folder (build/)")
    p.add_argument(
        "--save",
        nargs="*",
        type=Path,
        metavar="NOTEBOOK",
        help="execute these notebooks (default: all NN_*.ipynb) and save outputs in place",
    )
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    p.add_argument("-v", "--verbose", action="store_true", help="show the kernel's own stderr")
    args = p.parse_args(argv)
    _use_this_python()
    from nbclient.exceptions import CellExecutionError

    try:
        if args.save is not None:
            paths = [q.resolve() for q in args.save] or sorted(HERE.glob("[0-9][0-9]_*.ipynb"))
            return save(paths, args.timeout, args.verbose)
        return build(args.out.resolve(), args.timeout, args.verbose)
    except CellExecutionError as err:
        print(f"a notebook cell failed:\n{err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
