"""Print what the installed torch offers stance_magic (one line per fact).

Run by .ci/matrix.sh in each pair's venv; the README's "torch releases" table
is made from these lines.
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
        "stack_trace field": "stack_trace" in fields,
    }
    for k, v in facts.items():
        print(f"{k}: {v}")


if __name__ == "__main__":
    main()
