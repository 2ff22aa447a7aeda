"""Print what the installed torch offers stance_magic (one line per fact).

Run by .ci/matrix.sh in each pair's venv; the releases table of the docs
(docs/releases.md) is made from these lines.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import sys

import torch
import torch._dynamo.utils as utils
from torch._C._dynamo import eval_frame as c_eval_frame
from torch._dynamo import eval_frame


def main() -> None:
    root = os.path.dirname(torch.__file__)
    src = open(os.path.join(root, "_dynamo", "guards.py")).read()
    m = re.search(r"guard_manager_testing_hook_fn\(\s*([^)]*)\)", src)
    args = [a for a in re.split(r",\s*", m.group(1).strip()) if a] if m else []
    delayed = inspect.getsource(eval_frame._create_delayed_compile_callback)
    registry = os.path.join(root, "_dynamo", "graph_break_registry.json")
    try:
        from torch._logging._internal import log_registry

        artifact = any(q.endswith("__graph_breaks") for q in log_registry.get_artifact_log_qnames())
    except ImportError:
        artifact = False
    fields = [f.name for f in dataclasses.fields(utils.CompilationMetrics)]
    facts = {
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "set_guard_complete_hook": hasattr(c_eval_frame, "set_guard_complete_hook"),
        "testing hook arguments": len(args),
        "innermost_backend": hasattr(eval_frame, "innermost_backend"),
        "delayed callback linked": "_torchdynamo_orig_backend = callback" in delayed
        or "_torchdynamo_orig_callable = callback" in delayed,
        "add_compilation_metrics_to_chromium": hasattr(
            utils, "add_compilation_metrics_to_chromium"
        ),
        "CompilationMetrics fields": len(fields),
        "graph_breaks artifact": artifact,
        "graph-break registry entries": len(json.load(open(registry)))
        if os.path.exists(registry)
        else 0,
        "recompile_user_contexts": "recompile_user_contexts" in fields,
        "recompile user-context hooks": hasattr(utils, "register_hook_for_recompile_user_context"),
        "stack_trace field": "stack_trace" in fields,
        "stack_trace has the calling line": _stack_trace_has_caller()
        if "stack_trace" in fields
        else None,
        "torch.compile recompile_limit=": "recompile_limit"
        in inspect.signature(torch.compile).parameters,
    }
    for k, v in facts.items():
        print(f"{k}: {v}")


def _stack_trace_has_caller() -> bool:
    """Whether a compile record's ``stack_trace`` holds the frame that called
    the compiled function (2.13 and 2.15 cut it under the default stance)."""
    f = torch.compile(lambda x: x + 1, backend="eager")

    def the_caller() -> None:
        f(torch.ones(1))

    the_caller()
    rec = utils.get_compilation_metrics()[-1]
    return any("Name: the_caller," in line for line in rec.stack_trace or ())


if __name__ == "__main__":
    main()
