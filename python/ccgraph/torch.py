"""Shard a torch module in one call: export it with torch.onnx.export and
apply a plan. torch is optional: importing this module works without it,
and `export` says how to get it when it is missing."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Mapping, Optional, Union

from ._errors import BadInput
from ._functions import load, shard
from ._model import Model, PathLike


def export(module: Any, args: Any, plan: Union[Mapping[str, Any], PathLike],
           mesh: Union[str, Mapping[str, int]],
           path: Optional[PathLike] = None,
           dynamic_axes: Optional[Mapping[str, Any]] = None,
           sequence_parallel: bool = False, **export_kwargs: Any) -> Model:
    """Exports `module` called on `args` with torch.onnx.export (to a
    temporary file; `dynamic_axes` and `export_kwargs` are passed on, e.g.
    input_names, opset_version, dynamo) and shards the result with `plan`
    on `mesh`, as `ccgraph.shard` does. With `path`, the per-rank models
    are also written there. Returns the per-rank models. BadInput when
    torch is not installed or the export writes no model."""
    try:
        import torch  # noqa: F401  (optional dependency)
        import torch.onnx
    except ImportError as e:
        raise BadInput("ccgraph.torch.export needs torch (pip install torch): "
                       f"{e}", "UNSUPPORTED") from None
    with tempfile.TemporaryDirectory(prefix="ccgraph-export-") as d:
        f = os.path.join(d, "model.onnx")
        kwargs = dict(export_kwargs)
        if dynamic_axes is not None:
            kwargs["dynamic_axes"] = dynamic_axes
        torch.onnx.export(module, args, f, **kwargs)
        if not os.path.isfile(f):
            raise BadInput(f"torch.onnx.export wrote no model to {f}", "IO")
        with load(f) as whole:
            sharded = shard(whole, plan, mesh,
                            sequence_parallel=sequence_parallel)
    if path is not None:
        try:
            sharded.save(path)
        except BaseException:
            sharded.close()
            raise
    return sharded
