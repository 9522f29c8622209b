"""Fixtures: the source tree, the GPT sample model of the README's tour
(samples/make_gpt_block.py) and its plan, and the model sharded at tp=2."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ccgraph

SOURCE_DIR = Path(os.environ.get("CCGRAPH_SOURCE_DIR",
                                 Path(__file__).resolve().parents[2]))
PLAN = SOURCE_DIR / "samples" / "plan_gpt_block.json"


def make_gpt(path: Path, *args: str) -> Path:
    subprocess.run([sys.executable, str(SOURCE_DIR / "samples" /
                                        "make_gpt_block.py"), str(path),
                    *args], check=True, stdout=subprocess.DEVNULL)
    return path


@pytest.fixture(scope="session")
def source_dir() -> Path:
    return SOURCE_DIR


@pytest.fixture(scope="session")
def gpt_path(tmp_path_factory) -> Path:
    return make_gpt(tmp_path_factory.mktemp("gpt") / "gpt.onnx")


@pytest.fixture
def gpt(gpt_path):
    with ccgraph.load(gpt_path) as m:
        yield m


@pytest.fixture
def sharded(gpt):
    with ccgraph.shard(gpt, PLAN, mesh="tp=2") as m:
        yield m


@pytest.fixture(scope="session")
def ids() -> np.ndarray:
    return np.arange(16, dtype=np.int64).reshape(2, 8) % 50


@pytest.fixture(scope="session")
def spmd_path() -> Path:
    """test_onnx's megatron_mlp.onnx: one SPMD graph on tp=4 with input x
    [batch, 16] and an AllReduce (the ctest fixture onnx_models makes it;
    by hand: CCGRAPH_TEST_MODELS=build/tests/onnx_models after ctest -R
    test_onnx)."""
    folder = os.environ.get("CCGRAPH_TEST_MODELS",
                            SOURCE_DIR / "build" / "tests" / "onnx_models")
    path = Path(folder) / "megatron_mlp.onnx"
    assert path.exists(), f"{path}: run test_onnx first (ctest -R test_onnx)"
    return path
