"""The public API and ``%stance`` as a listing, held against the one stored in
``tests/data/public_api.txt``: a restructuring of the package (modules moved
into packages by role) leaves what a user calls exactly as it was.

The listing has every name of ``stance_magic.__all__`` with its kind and
signature, each public class's public methods and properties (with their
signatures), and the help of ``%stance`` / ``%%stance`` as IPython shows it
(``%stance?``), read from a real shell with the extension loaded. A change
meant to change the API rewrites the stored listing on purpose::

    .venv/bin/python tests/test_public_listing.py --write
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

STORED = Path(__file__).resolve().parent / "data" / "public_api.txt"


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def listing(shell: object) -> str:
    """The public API and the magic's help, one line per name."""
    import stance_magic

    lines = []
    for name in sorted(stance_magic.__all__):
        obj = getattr(stance_magic, name)
        if inspect.isclass(obj):
            lines.append(f"class {name}{_signature(obj)}")
            for attr, value in sorted(vars(obj).items()):
                if attr.startswith("_"):
                    continue
                if isinstance(value, property):
                    lines.append(f"    property {name}.{attr}")
                elif isinstance(value, (staticmethod, classmethod)):
                    lines.append(
                        f"    {type(value).__name__} {name}.{attr}{_signature(value.__func__)}"
                    )
                elif inspect.isfunction(value):
                    lines.append(f"    method {name}.{attr}{_signature(value)}")
                elif not callable(value):
                    lines.append(f"    attribute {name}.{attr}")
        elif callable(obj):
            lines.append(f"function {name}{_signature(obj)}")
        else:
            lines.append(f"value {name}: {type(obj).__name__}")
    magics = shell.magics_manager.magics  # type: ignore[attr-defined]
    for kind in ("line", "cell"):
        magic = magics[kind]["stance"]
        lines.append(f"%{'%' if kind == 'cell' else ''}stance help:")
        lines.extend("    " + ln.rstrip() for ln in (magic.__doc__ or "").splitlines())
    return "\n".join(lines) + "\n"


def test_the_public_api_and_the_magic_are_as_stored(sh):
    now = listing(sh)
    stored = STORED.read_text("utf-8")
    assert now == stored, (
        "the public API or %stance's help changed; if that is meant, rewrite the listing "
        "(python tests/test_public_listing.py --write) and say so in the changelog"
    )


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "stance_magic")
    STORED.parent.mkdir(exist_ok=True)
    STORED.write_text(listing(shell), "utf-8")
    print(f"wrote {STORED}")
