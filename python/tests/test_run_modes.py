"""Model.run beyond one step on local threads: steps, the step time, a rank
per process under mpirun (comm="mpi"), a GPU (device="cuda"), and the
combinations it refuses."""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ccgraph
from ccgraph import _lib


def test_steps_repeat_the_step(sharded, ids):
    one = sharded.run({"ids": ids})
    three = sharded.run({"ids": ids}, steps=3)
    assert sharded.last_ranks == [0, 1]
    assert sharded.last_step_seconds > 0
    for r in range(2):
        np.testing.assert_array_equal(three[r]["logits"], one[r]["logits"])


@pytest.mark.parametrize("kwargs, words", [
    ({"steps": 0}, "steps=0: give an int, 1 or more"),
    ({"steps": 2.5}, "steps=2.5"),
    ({"steps": True}, "steps=True"),
    ({"comm": "gloo"}, "comm='gloo': give 'local'"),
    ({"device": "tpu"}, "device='tpu': give 'cpu' or 'cuda'"),
    ({"comm": "nccl"}, "comm='nccl' moves GPU memory"),
    ({"comm": "mpi", "device": "cuda"}, "GPU ranks talk through comm='nccl'"),
    ({"device": "cuda"}, "the mesh has 2: give comm='nccl'"),
])
def test_refused_combinations(sharded, ids, kwargs, words):
    """Refused before anything starts: no MPI, no GPU touched."""
    with pytest.raises(ccgraph.BadInput) as e:
        sharded.run({"ids": ids}, **kwargs)
    assert words in e.value.message and e.value.status == "INVALID_ARG"


def test_cuda_runs_or_says_why(gpt, ids):
    """A one-rank model on a GPU: where one can be used the outputs match
    the CPU's (TF32 off: f32 GEMMs); where not, the error names CUDA or the
    GPU (the library's message), and the CPU run still works after it."""
    cpu = gpt.run({"ids": ids})[0]["logits"]
    try:
        gpu = gpt.run({"ids": ids}, device="cuda")[0]["logits"]
    except ccgraph.Error as e:
        assert isinstance(e, (ccgraph.RuntimeFailure, ccgraph.BadInput))
        assert any(w in e.message for w in ("CUDA", "GPU", "cuda")), \
            e.message
        np.testing.assert_array_equal(gpt.run({"ids": ids})[0]["logits"],
                                      cpu)
        return
    np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-5)


MPI_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import ccgraph
    model, ids, out = sys.argv[1:4]
    with ccgraph.load(model) as m:
        res = m.run({"ids": np.load(ids)}, comm="mpi", steps=2)
        assert len(res) == 1 and len(m.last_ranks) == 1, res
        np.save(f"{out}.rank{m.last_ranks[0]}.npy", res[0]["logits"])
""")


def _mpirun():
    """mpirun and its flags to start local processes as this user (root
    needs leave; 2 processes may exceed the cores)."""
    exe = shutil.which("mpirun")
    if not exe:
        pytest.skip("mpirun is not installed (openmpi-bin)")
    if not _lib.lib.ccg_comm_mpi_available():
        pytest.skip("the library was built without MPI (libopenmpi-dev)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    return [exe, "--oversubscribe", "-np", "2"], env


def test_mpi_rank_per_process_matches_local(sharded, ids, tmp_path):
    """Two processes under mpirun, each its own rank of the tp=2 model:
    each one's outputs equal that rank's in the local (threads) run."""
    cmd, env = _mpirun()
    model = tmp_path / "gpt.tp2.onnx"
    sharded.save(model)
    np.save(tmp_path / "ids.npy", ids)
    script = tmp_path / "run_mpi.py"
    script.write_text(MPI_SCRIPT)
    p = subprocess.run(cmd + [sys.executable, str(script), str(model),
                              str(tmp_path / "ids.npy"),
                              str(tmp_path / "out")],
                       env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    local = sharded.run({"ids": ids})
    for r in range(2):
        got = np.load(tmp_path / f"out.rank{r}.npy")
        np.testing.assert_array_equal(got, local[r]["logits"],
                                      err_msg=f"rank {r}")


def test_mpi_job_of_the_wrong_size(sharded, ids, tmp_path):
    """A one-process job for a two-rank model: refused, naming both."""
    cmd, env = _mpirun()
    model = tmp_path / "gpt.tp2.onnx"
    sharded.save(model)
    np.save(tmp_path / "ids.npy", ids)
    script = tmp_path / "run_mpi.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import ccgraph
        with ccgraph.load(sys.argv[1]) as m:
            try:
                m.run({"ids": np.load(sys.argv[2])}, comm="mpi")
            except ccgraph.BadInput as e:
                print("refused:", e.message)
                sys.exit(7)
    """))
    cmd[cmd.index("-np") + 1] = "1"
    p = subprocess.run(cmd + [sys.executable, str(script), str(model),
                              str(tmp_path / "ids.npy")],
                       env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 7, p.stdout + p.stderr
    assert "the job has 1 processes and the model's mesh 2 ranks" in p.stdout
