"""The README's Python example, taken from the README as it is and run in a
folder holding the tour's gpt.onnx and the samples: it cannot go stale."""
import os
import re
import subprocess
import sys

from conftest import make_gpt


def readme_example(source_dir):
    text = (source_dir / "README.md").read_text()
    m = re.search(r"<!-- python-example: begin -->\n```python\n(.*?)```\n"
                  r"<!-- python-example: end -->", text, re.S)
    assert m, "README.md has no python-example block"
    return m.group(1)


def test_readme_example_runs(source_dir, tmp_path):
    code = readme_example(source_dir)
    assert 8 <= len(code.strip().splitlines()) <= 14
    make_gpt(tmp_path / "gpt.onnx")
    os.symlink(source_dir / "samples", tmp_path / "samples")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [l.split(":")[0] for l in lines[:2]] == ["rank 0", "rank 1"]
    assert "'ok': True" in lines[2] and "'bus_bytes': 24576.0" in lines[2]
