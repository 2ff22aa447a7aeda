"""Backends: the names torch lists, which can run here, and the name of the
backend a Dynamo callback compiles with."""

from __future__ import annotations

import functools
import os
from typing import Any

from .releases import innermost_backend
from .version import require_torch


def list_backends() -> list[str]:
    """Every backend name registered with torch, debug ones included."""
    require_torch()
    import torch._dynamo

    try:
        return list(torch._dynamo.list_backends(exclude_tags=()))
    except TypeError:  # pragma: no cover - older signature
        return list(torch._dynamo.list_backends())


#: Registered backends that need a package torch does not ship:
#: name -> (module to find, what to install).
BACKEND_PACKAGES: dict[str, tuple[str, str]] = {
    "tvm": ("tvm", "apache-tvm"),
    "openxla": ("torch_xla", "torch_xla"),
    "openxla_eval": ("torch_xla", "torch_xla"),
    "onnxrt": ("onnxruntime", "onnxruntime"),
    "tensorrt": ("torch_tensorrt", "torch-tensorrt"),
    "torch_tensorrt": ("torch_tensorrt", "torch-tensorrt"),
    "ipex": ("intel_extension_for_pytorch", "intel-extension-for-pytorch"),
}

#: Backends that compile through TorchScript (``torch.jit.script``).
TORCHSCRIPT_BACKENDS = ("ts", "aot_ts")


def is_test_backend(name: str) -> bool:
    """torch's own test and minifier backends: registered, never worth offering."""
    return "TESTING_ONLY" in name or "minifier" in name


@functools.cache
def _torchscript_problem() -> str | None:
    """Whether ``torch.jit.script`` accepts the graph modules Dynamo hands a
    backend (lazy graph modules); cached, about 30 ms once."""
    import torch

    try:
        from torch.fx._lazy_graph_module import _make_graph_module, _use_lazy_graph_module
    except ImportError:  # pragma: no cover - older torch: no lazy graph modules
        return None
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_method("sin", (x,)))
    try:
        with _use_lazy_graph_module(True):
            gm = _make_graph_module(torch.nn.Module(), graph)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.jit.script(gm)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"torch.jit.script cannot script the graphs Dynamo produces here ({first.strip()})"
    return None


def _has_cxx() -> bool:
    import shutil

    cxx = os.environ.get("CXX")
    return any(shutil.which(c) for c in ([cxx] if cxx else []) + ["g++", "c++", "clang++"])


@functools.cache
def backend_problem(name: str) -> str | None:
    """Why the registered backend ``name`` cannot run here, or None if it can.

    What is checked, without compiling anything: a package the backend
    imports when it compiles (``tvm``, ``torch_xla``, ...), a CUDA device for
    ``cudagraphs``, a C++ compiler for Inductor on a machine without CUDA,
    TorchScript for ``ts``/``aot_ts``, and backends that need arguments a
    name cannot pass. Cached per name (the answers do not change while the
    process lives, short of installing a package: restart the kernel then).

    Examples
    --------
    >>> backend_problem("eager") is None
    True
    >>> backend_problem("tvm")  # doctest: +SKIP
    "needs the tvm package, which is not installed (pip install apache-tvm)"
    """
    import importlib.util
    import inspect

    require_torch()
    import torch

    if name in BACKEND_PACKAGES:
        module, package = BACKEND_PACKAGES[name]
        if importlib.util.find_spec(module) is None:
            return f"needs the {module} package, which is not installed (pip install {package})"
        return None
    if name == "cudagraphs" and not torch.cuda.is_available():
        return "needs a CUDA device (torch.cuda.is_available() is False)"
    if name == "inductor" and not torch.cuda.is_available() and not _has_cxx():
        return "Inductor needs a C++ compiler for CPU code; none found (g++, clang++ or $CXX)"
    if name in TORCHSCRIPT_BACKENDS:
        return _torchscript_problem()
    try:
        import torch._dynamo

        fn = torch._dynamo.lookup_backend(name)
    except Exception as err:
        return f"torch cannot load it ({type(err).__name__}: {err})"
    if inspect.isfunction(fn):
        params = inspect.signature(fn).parameters.values()
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        extra = [p.name for p in params if p.default is p.empty and p.kind in positional][2:]
        if extra:
            return (
                f"it needs argument{'s' if len(extra) > 1 else ''} {', '.join(extra)}, "
                "which a backend name cannot pass"
            )
    return None


def usable_backends() -> list[str]:
    """Registered backends that can run here, torch's test backends left out.

    Examples
    --------
    >>> "eager" in usable_backends() and "relu_compile_error_TESTING_ONLY" not in usable_backends()
    True
    """
    return [n for n in list_backends() if not is_test_backend(n) and backend_problem(n) is None]


def backend_name(callback: Any) -> str | None:
    """The name of the backend a Dynamo callback compiles with."""
    if callback in (None, False, True):
        return None
    inner = innermost_backend(callback)
    name = getattr(inner, "compiler_name", None)
    if isinstance(name, str) and not name.startswith("<"):
        return name
    fn = getattr(inner, "compiler_fn", inner)
    return getattr(fn, "__name__", None) or type(fn).__name__
