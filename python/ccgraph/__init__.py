"""ccgraph from Python: load ONNX models, shard them with a DTensor-style
plan, add their backward, run them on local thread ranks, verify and cost
their communication. A binding of the C library's public API (ctypes over
libccgraph.so; include/ccgraph/*.h) and nothing more.

    import ccgraph
    gpt = ccgraph.load("gpt.onnx")
    sharded = ccgraph.shard(gpt, "samples/plan_gpt_block.json", mesh="tp=2")
    outs = sharded.run({"ids": ids})          # one dict per rank

The library is found through $CCGRAPH_LIBRARY, else the build tree's
build/libccgraph.so beside the sources the package was installed from, else
the installed library (ctypes.util.find_library("ccgraph")); `library_path`
says which.
"""
from . import _lib
from ._errors import BadInput, CheckFailed, Error, RuntimeFailure
from ._functions import cost, grad, load, part_of, plan, shard, verify
from ._model import Model, TensorInfo

__version__ = "0.1.0"

library_path: str = _lib.path
"""The path of the C library this package uses."""


def library_version() -> str:
    """The C library's version ("0.1.0")."""
    return _lib.text(_lib.lib.ccg_version())


__all__ = ["Model", "TensorInfo", "load", "shard", "plan", "grad", "verify",
           "cost",
           "part_of", "Error", "BadInput", "RuntimeFailure", "CheckFailed",
           "library_path", "library_version"]
