#!/usr/bin/env python3
"""Run the model zoo (tests/data/zoo) through ccgraph, on one rank and sharded.

usage: run_zoo.py CCGRAPH [--zoo DIR] [--work DIR] [--only ARCH[/VARIANT]]
                  [--jobs N] [--no-shard] [--device cpu|cuda]
                  [--print-expected]
                  [--write docs/models.md | --check docs/models.md]

For every model of the zoo's MANIFEST.json: checks the sha256 of its files,
runs it with `ccgraph run --output-dir` on the stored inputs and compares
every output with torch's (max abs diff <= 1e-4). A training variant is
first given its backward with `ccgraph grad --loss loss --wrt <params>`,
and then the loss, the outputs and every parameter gradient are compared
with torch autograd's: max abs diff <= 1e-4 and, per parameter, relative
error <= 1e-3 (the largest |difference| over the largest |torch gradient|,
that at least 1e-4: below it torch's gradient is rounding noise).

Models that ccgraph cannot run yet are in EXPECTED below with the exact
reason. Such a model counts as unsupported while it fails with that reason;
it fails the test if it passes (remove its row) or fails otherwise. Any
other failure fails the test. The last line is
'zoo: N passed, M failed, K unsupported'.

--device cuda runs the one-rank runs on the GPU (`ccgraph run --device
cuda`), against the same torch outputs and gradients, without the sharded
runs (their ranks are threads of one process, which the GPU device does not
take) and without --write / --check (docs/models.md is the CPU's). Where no
GPU can be used it prints why and exits 77 (skipped).

--print-expected prints this run's failures as EXPECTED tables.
--write FILE replaces the results table of docs/models.md (between its
markers) with this run's; --check FILE fails if the table there differs.

Sharded runs (issue 16): every model that passes on one rank is then
sharded on each of CONFIGS: tp=2, tp=4, tp=2 and tp=4 with
--sequence-parallel, with the plan that `ccgraph plan MODEL --mesh tp=N
[--sequence-parallel] --json` proposes for it (samples/plans/<arch>.json
is that plan for the arch's ts_static export at tp=2, <arch>.tp4.json and
<arch>.sp.json where tp=4 or sequence parallelism changes it; a variant
uses the sample file where its proposal is the same, its own proposal
otherwise, and the run says which); training variants also at tp=2 and
tp=4 with the LM head's logits kept sharded for the vocab-parallel cross
entropy ("ce"), and Mixtral's exports at tp=2 and tp=4 with its experts
split across the ranks ("ep", expert_parallel): those plans are the
arch's rewritten (vocab_ce_plan, expert_plan), and the shard must hold
what they ask for (vocab_ce_check, expert_check). For each: `ccgraph
shard`, `ccgraph verify` on the shard, and `ccgraph run SHARD --input ...
--check MODEL.onnx` (every rank against its part of the unsharded run,
whose outputs match torch). A training variant's shard is differentiated
(`ccgraph grad SHARD --loss loss`) and run; every rank's loss and logits
are compared with torch's, and its parameter gradients with their parts
of torch autograd's, through the shard's provenance (torch_grads; the
same abs and relative bounds). Sequence-parallel runs of dynamic variants
take a sequence length tp divides (sp_inputs). Known failures of these
(arch, variant, config) checks are in SHARD_EXPECTED, under the same rules
as EXPECTED. --no-shard skips them.

Every model ccgraph writes (the one-rank gradient models, every rank of
every shard and of its backward) then goes through
onnx.checker.check_model(full_check=True) (onnx_check.py, --jobs
processes); a refused model fails its run, one the installed onnx is too
old to judge is counted as skipped, with the reason, in the table.

Needs python3, numpy and onnx (Debian's python3-numpy, python3-onnx).
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

TOL = 1e-4
HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.normpath(os.path.join(HERE, "..", "data", "zoo"))
BEGIN = "<!-- zoo results: begin -->"
END = "<!-- zoo results: end -->"

# (arch, variant) -> the exact reason it fails today: the last line that
# ccgraph prints (or the comparison's message). Kept honest by the test.
EXPECTED = {
}
# (arch, variant, config) -> the same. ViT's 17 positions (16 patches and
# the class token) divide by neither 2 nor 4, and sequence parallelism
# cuts the sequence into tp equal shards.
SHARD_EXPECTED = {
    ('vit', 'ts_static', 'tp=2 sp'):
        "plan exit 2: ccgraph plan: vit/ts_static/model.onnx: plan: no sequence-parallel plan on tp=2: sequence 17 is not divisible by tp=2 (LayerNorm 'vit.encoder.layer.0.layernorm_before'), and shard --sequence-parallel runs every LayerNorm and rowwise output on sequence shards; propose without --sequence-parallel",
    ('vit', 'ts_static', 'tp=4 sp'):
        "plan exit 2: ccgraph plan: vit/ts_static/model.onnx: plan: no sequence-parallel plan on tp=4: sequence 17 is not divisible by tp=4 (LayerNorm 'vit.encoder.layer.0.layernorm_before'), and shard --sequence-parallel runs every LayerNorm and rowwise output on sequence shards; propose without --sequence-parallel",
    ('vit', 'ts_dynamic', 'tp=2 sp'):
        "shard exit 2: ccgraph shard: vit/ts_dynamic/model.onnx: shard: node '/vit/encoder/layer.0/layernorm_before/LayerNormalization' (LayerNormalization): value '/vit/embeddings/Add_output_0' sequence dim 1 (size 17) is not divisible by tp=2",
    ('vit', 'ts_dynamic', 'tp=4 sp'):
        "shard exit 2: ccgraph shard: vit/ts_dynamic/model.onnx: shard: node '/vit/encoder/layer.0/layernorm_before/LayerNormalization' (LayerNormalization): value '/vit/embeddings/Add_output_0' sequence dim 1 (size 17) is not divisible by tp=4",
    ('vit', 'ts_train', 'tp=2 sp'):
        "shard exit 2: ccgraph shard: vit/ts_train/model.onnx: shard: node '/vit/encoder/layer.0/layernorm_before/LayerNormalization' (LayerNormalization): value '/vit/embeddings/Add_output_0' sequence dim 1 (size 17) is not divisible by tp=2",
    ('vit', 'ts_train', 'tp=4 sp'):
        "shard exit 2: ccgraph shard: vit/ts_train/model.onnx: shard: node '/vit/encoder/layer.0/layernorm_before/LayerNormalization' (LayerNormalization): value '/vit/embeddings/Add_output_0' sequence dim 1 (size 17) is not divisible by tp=4",
    ('vit', 'dynamo_static', 'tp=2 sp'):
        "shard exit 2: ccgraph shard: vit/dynamo_static/model.onnx: shard: node 'node_layer_norm' (LayerNormalization): value 'add' sequence dim 1 (size 17) is not divisible by tp=2",
    ('vit', 'dynamo_static', 'tp=4 sp'):
        "shard exit 2: ccgraph shard: vit/dynamo_static/model.onnx: shard: node 'node_layer_norm' (LayerNormalization): value 'add' sequence dim 1 (size 17) is not divisible by tp=4",
    ('vit', 'dynamo_dynamic', 'tp=2 sp'):
        "shard exit 2: ccgraph shard: vit/dynamo_dynamic/model.onnx: shard: node 'node_layer_norm' (LayerNormalization): value 'add_17' sequence dim 1 (size 17) is not divisible by tp=2",
    ('vit', 'dynamo_dynamic', 'tp=4 sp'):
        "shard exit 2: ccgraph shard: vit/dynamo_dynamic/model.onnx: shard: node 'node_layer_norm' (LayerNormalization): value 'add_17' sequence dim 1 (size 17) is not divisible by tp=4",
    ('vit', 'dynamo_train', 'tp=2 sp'):
        "shard exit 2: ccgraph shard: vit/dynamo_train/model.onnx: shard: node 'node_layer_norm' (LayerNormalization): value 'clone' sequence dim 1 (size 17) is not divisible by tp=2",
    ('vit', 'dynamo_train', 'tp=4 sp'):
        "shard exit 2: ccgraph shard: vit/dynamo_train/model.onnx: shard: node 'node_layer_norm' (LayerNormalization): value 'clone' sequence dim 1 (size 17) is not divisible by tp=4",
}

REL_TOL = 1e-3
# Below this, a parameter's largest torch gradient is rounding noise (a
# gradient that is zero in exact arithmetic, such as attention's key bias:
# softmax does not change when a row is shifted), so the relative error is
# taken against this floor instead.
REL_FLOOR = 1e-4


class Config(tuple):
    """A sharded run: label (the table's column), tp, sequence parallel,
    and kind: None (the arch's plan), "ce" (the plan with the LM head's
    logits kept sharded on the vocabulary, feeding a vocab-parallel cross
    entropy) or "ep" (Mixtral's experts split across the ranks:
    expert_parallel)."""
    def __new__(cls, label, tp, sp, kind=None):
        return super().__new__(cls, (label, tp, sp, kind))


CONFIGS = [Config("tp=2", 2, False), Config("tp=4", 4, False),
           Config("tp=2 sp", 2, True), Config("tp=4 sp", 4, True),
           Config("tp=2 ce", 2, False, "ce"),
           Config("tp=4 ce", 4, False, "ce"),
           Config("tp=2 ep", 2, False, "ep"),
           Config("tp=4 ep", 4, False, "ep")]
PLANS = os.path.normpath(os.path.join(HERE, "..", "..", "samples", "plans"))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Failure(Exception):
    """reason: stable text (what EXPECTED holds); detail: printed beside it
    (numbers that may move in the last digit from one machine to another)."""
    def __init__(self, reason, detail=""):
        super().__init__(reason)
        self.detail = detail


def tool(cmd, strip):
    """Run ccgraph; a non-zero exit is a Failure with its last message
    (the paths in `strip` taken out, so that the message is the same in
    every checkout)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=600)
    if p.returncode != 0:
        lines = [l.strip() for l in p.stderr.splitlines() if l.strip()] \
            or [l.strip() for l in p.stdout.splitlines() if l.strip()]
        msg = lines[-1] if lines else "(no message)"
        for prefix in strip:
            msg = msg.replace(prefix.rstrip("/") + "/", "")
        raise Failure(f"{cmd[1]} exit {p.returncode}: {msg}")
    return p.stdout


def out_file(outdir, name, rank=0):
    return os.path.join(outdir, f"rank{rank}", name.replace("/", "_") + ".npy")


def compare(name, got_path, want):
    if not os.path.exists(got_path):
        raise Failure(f"no output '{name}'")
    got = np.load(got_path)
    if got.shape != want.shape:
        raise Failure(f"'{name}' shape {list(got.shape)}, torch "
                      f"{list(want.shape)}")
    if not np.all(np.isfinite(got)):
        raise Failure(f"'{name}' has non-finite values")
    diff = float(np.max(np.abs(got.astype(np.float64) - want))) \
        if want.size else 0.0
    if diff > TOL:
        raise Failure(f"'{name}' differs from torch by more than {TOL:g}",
                      f"max abs diff {diff:.3g}")
    return diff


def grad_error(diff, want):
    """The relative error of a parameter's gradient: the largest |difference|
    over the largest |torch gradient| (at least REL_FLOOR)."""
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    return diff / max(scale, REL_FLOOR)


def check_grad_error(worst, rel):
    if worst > TOL:
        raise Failure(f"a parameter gradient differs from torch's by more "
                      f"than {TOL:g}", f"max abs diff {worst:.3g}")
    if rel > REL_TOL:
        raise Failure(f"a parameter gradient's relative error against "
                      f"torch's is more than {REL_TOL:g}",
                      f"relative error {rel:.3g}")


def run_model(ccgraph, zoo, m, work, device="cpu"):
    """One rank on `device`: returns the max abs diff of the outputs and,
    for a training variant, the largest relative error of a parameter
    gradient (None otherwise) and the path of the gradient model."""
    d = os.path.join(work, m["arch"], m["variant"])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model = os.path.join(zoo, m["model"])
    gmodel = None
    if m.get("loss"):
        grads = np.load(os.path.join(zoo, m["grads"]))
        wrt = ",".join(m["grad_params"])
        gmodel = os.path.join(d, "grad.onnx")
        tool([ccgraph, "grad", model, "--loss", m["loss"], "--wrt", wrt,
              "-o", gmodel], (zoo, d))
        model = gmodel
    cmd = [ccgraph, "run", model, "--output-dir", os.path.join(d, "out"),
           "--device", device]
    for n, f in m["inputs"].items():
        cmd += ["--input", f"{n}={os.path.join(zoo, f)}"]
    tool(cmd, (zoo, d))
    worst = 0.0
    for n, f in m["outputs"].items():
        want = np.load(os.path.join(zoo, f)).astype(np.float64)
        worst = max(worst, compare(n, out_file(os.path.join(d, "out"), n),
                                   want))
    if not m.get("loss"):
        return worst, None, None
    gworst = grel = 0.0
    for p in m["grad_params"]:
        g = "grad/" + p
        want = grads[p].astype(np.float64)
        diff = compare(g, out_file(os.path.join(d, "out"), g), want)
        gworst = max(gworst, diff)
        grel = max(grel, grad_error(diff, want))
    check_grad_error(gworst, grel)
    return max(worst, gworst), grel, gmodel


def sample_plan(arch, config):
    """samples/plans/<arch>.json: ccgraph plan's proposal for the arch's
    ts_static export at tp=2; <arch>.tp4.json, <arch>.sp.json and
    <arch>.tp4.sp.json where tp=4, --sequence-parallel or both give
    another plan (the first of them that exists)."""
    label, tp, sp, kind = config
    names = [arch + (f".tp{tp}" if tp != 2 else "") + (".sp" if sp else "")]
    if sp and tp != 2:
        names += [arch + ".sp", arch + f".tp{tp}"]
    for n in names:
        p = os.path.join(PLANS, n + ".json")
        if os.path.exists(p):
            return p
    return os.path.join(PLANS, arch + ".json")


def vocab_ce_plan(plan):
    """The plan with the LM head's logits left sharded on the vocabulary
    (a colwise entry whose output was gathered: DTensor's default colwise,
    output Shard(-1)), so that the loss reading them is the vocab-parallel
    cross entropy (docs/shard.md)."""
    gathered = {"style": "colwise", "output_layouts": "Replicate"}
    return {k: ("colwise" if v == gathered else v) for k, v in plan.items()}


def expert_plan(plan):
    """The plan with each mixture-of-experts block expert_parallel (its
    experts split across the ranks) instead of tensor-parallel experts."""
    out = {k: v for k, v in plan.items() if ".experts." not in k}
    for k in plan:
        if ".experts." in k:
            out[k.split(".experts.")[0]] = "expert_parallel"
    return out


DERIVE = {"ce": vocab_ce_plan, "ep": expert_plan}


def applies(m, config, sample_json):
    """Whether the config exercises something in this model: the
    vocab-parallel cross entropy needs a training variant and an LM head
    that the arch's plan gathers, expert parallelism a plan with experts."""
    kind = config[3]
    if kind is None:
        return True
    if kind == "ce" and not m.get("loss"):
        return False
    return DERIVE[kind](sample_json) != sample_json


def shard_model(ccgraph, zoo, m, work, config):
    """Shard, verify and run one model on one config with the arch's
    sample plan, or with the plan ccgraph proposes for this model where
    the arch's plan does not shard it (for the "ce" and "ep" kinds, that
    plan rewritten by DERIVE); returns the max abs diff of every rank
    against its part of the unsharded run (training variants: against
    torch), which plan it took ("arch" or "own"), how many weights it
    split, the parameter gradients' max abs diff and relative error
    against torch (None, None for inference variants) and the models that
    onnx.checker is to judge."""
    label, tp, sp, kind = config
    d = os.path.join(work, m["arch"], m["variant"],
                     label.replace("=", "").replace(" ", "_"))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model = os.path.join(zoo, m["model"])
    strip = (zoo, d)
    mesh = ["--mesh", f"tp={tp}"] + (["--sequence-parallel"] if sp else [])
    sample = sample_plan(m["arch"], config)
    with open(sample) as f:
        sample_json = json.load(f)
    derive = DERIVE.get(kind, lambda p: p)

    def propose():
        text = tool([ccgraph, "plan", model, "--json"] + mesh, strip)
        return json.loads(text)

    if m["variant"] == "ts_static" and kind is None \
            and propose() != sample_json:
        raise Failure(f"{os.path.relpath(sample, os.path.dirname(PLANS))} "
                      "is not the plan that ccgraph plan proposes "
                      "(rewrite it)")
    shard = os.path.join(d, "shard")
    used = "arch"
    plan = sample
    if kind is not None:
        plan = os.path.join(d, "plan.json")
        with open(plan, "w") as f:
            json.dump(derive(sample_json), f, indent=2)
    try:
        out = tool([ccgraph, "shard", model, "--plan", plan, "-o", shard,
                    "--json"] + mesh, strip)
    except Failure as first:
        try:
            own = derive(propose())
        except Failure:
            raise first
        if own == derive(sample_json):
            raise first
        plan = os.path.join(d, "plan.json")
        with open(plan, "w") as f:
            json.dump(own, f, indent=2)
        shutil.rmtree(shard, ignore_errors=True)
        try:
            out = tool([ccgraph, "shard", model, "--plan", plan, "-o", shard,
                        "--json"] + mesh, strip)
        except Failure:
            raise first
        used = "own"
    tool([ccgraph, "verify", shard], strip)
    summary = json.loads(out)
    checked = rank_models(shard)
    if kind is not None:
        KIND_CHECK[kind](shard, checked)
    inputs = sp_inputs(m, zoo, d, tp) if sp else \
        {n: os.path.join(zoo, f) for n, f in m["inputs"].items()}
    if m.get("loss"):
        # every rank's backward, run; its outputs and parameter gradients
        # against torch's (through the shard's provenance)
        outdir = os.path.join(d, "out")
        gshard = os.path.join(d, "grad")
        tool([ccgraph, "grad", shard, "--loss", m["loss"], "-o", gshard],
             strip)
        checked += rank_models(gshard)
        cmd = [ccgraph, "run", gshard, "--output-dir", outdir]
        for n, f in inputs.items():
            cmd += ["--input", f"{n}={f}"]
        tool(cmd, strip)
        world = summary["ranks"]
        diff = 0.0
        for n, f in m["outputs"].items():
            want = np.load(os.path.join(zoo, f)).astype(np.float64)
            for r in range(world):
                diff = max(diff, compare(f"rank {r}: {n}",
                                         out_file(outdir, n, r), want))
        gdiff, grel = torch_grads(m, zoo, outdir, summary.get("provenance"))
        return (diff, used, summary["sharded_params"], gdiff, grel), checked
    cmd = [ccgraph, "run", shard, "--check", model, "--json"]
    for n, f in inputs.items():
        cmd += ["--input", f"{n}={f}"]
    r = json.loads(tool(cmd, strip))
    if not r.get("checked_outputs"):
        raise Failure("run --check compared no output")
    return (float(r["max_abs_diff"]), used, summary["sharded_params"], None,
            None), checked


def rank_models(folder):
    paths = sorted(os.path.join(folder, f) for f in os.listdir(folder)
                   if f.endswith(".onnx"))
    if not paths:
        raise Failure(f"no .onnx model in {os.path.basename(folder)}")
    return paths


def sp_inputs(m, zoo, d, tp):
    """The inputs of a sequence-parallel run. Sequence parallelism cuts
    the sequence into tp equal shards (a ReduceScatter, as in Megatron-LM),
    so a dynamic model run at a sequence length that tp does not divide
    fails at run time, rightly; it is run at the largest length below that
    tp divides (token ids [batch, seq] cut to their first seq // tp * tp
    positions; the unsharded reference takes the same)."""
    out = {}
    for n, f in m["inputs"].items():
        path = os.path.join(zoo, f)
        a = np.load(path)
        if "dynamic" in m["variant"] and a.ndim == 2 and a.shape[1] % tp:
            os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
            path = os.path.join(d, "inputs", os.path.basename(f))
            np.save(path, a[:, :a.shape[1] // tp * tp])
        out[n] = path
    return out


def torch_grads(m, zoo, outdir, provenance):
    """Every rank's parameter gradients against torch autograd's, through
    the shard's provenance (docs/shard.md): a parameter's gradient on a
    rank is the sum of its weights' gradients (uses of one parameter: tied,
    folded or copied weights), each put back where its part of the
    parameter lies (ranges of one dim, transposed where the rank holds it
    transposed); it must equal torch's where all of them reach, and every
    element must be reached on some rank. A weight holding another
    parameter on each rank (an expert-parallel slot) names them in
    "params", one per rank.
    Returns the max abs diff and the largest relative error (grad_error)."""
    if not provenance or "weights" not in provenance:
        raise Failure("ccgraph shard --json gave no provenance")
    grads = np.load(os.path.join(zoo, m["grads"]))
    def param(w, r):
        return w["params"][r] if "params" in w else w["param"]

    worst = rel = 0.0
    for p in m["grad_params"]:
        want = grads[p].astype(np.float64)
        if not any(param(w, r) == p for w in provenance["weights"]
                   for r in range(provenance["world"])):
            raise Failure(f"no rank weight holds parameter '{p}'")
        covered = np.zeros(want.shape, bool)
        pworst = 0.0
        for r in range(provenance["world"]):
            uses = [w for w in provenance["weights"] if param(w, r) == p]
            if not uses:
                continue
            acc = np.zeros(want.shape)
            cnt = np.zeros(want.shape, int)
            for w in uses:
                g = np.load(out_file(outdir, "grad/" + w["name"], r))
                g = g.T if w["transposed"] else g
                idx = [slice(None)] * want.ndim
                if w["dim"] is not None:
                    ranges = w["ranks"][r]
                    idx[w["dim"]] = slice(*ranges[0]) if len(ranges) == 1 \
                        else np.concatenate([np.arange(a, b)
                                             for a, b in ranges])
                if acc[tuple(idx)].shape != g.shape:
                    raise Failure(f"rank {r}: 'grad/{w['name']}' is not the "
                                  f"part of '{p}' the provenance names")
                acc[tuple(idx)] += g
                cnt[tuple(idx)] += 1
            mine = cnt == len(uses)
            covered |= mine
            if mine.any():
                pworst = max(pworst,
                             float(np.max(np.abs(acc[mine] - want[mine]))))
        if not covered.all():
            raise Failure(f"the ranks' gradients of '{p}' do not cover it")
        worst = max(worst, pworst)
        rel = max(rel, grad_error(pworst, want))
    try:
        check_grad_error(worst, rel)
    except Failure as e:
        raise Failure("a rank's " + str(e)[2:], e.detail)
    return worst, rel


def vocab_ce_check(shard, models):
    """The loss is the vocab-parallel cross entropy: no
    SoftmaxCrossEntropyLoss left, a per-rank '<loss>.vocab_start'."""
    g = load_graph(models[0])
    if "SoftmaxCrossEntropyLoss" in {n.op_type for n in g.node}:
        raise Failure("the shard still has a SoftmaxCrossEntropyLoss: the "
                      "loss is not vocab-parallel")
    if not any(i.name.endswith(".vocab_start") for i in g.initializer):
        raise Failure("the shard has no '.vocab_start': the loss is not "
                      "vocab-parallel")


def expert_check(shard, models):
    """The experts are split: slot weights, and none of an expert's own."""
    names = [i.name for i in load_graph(models[0]).initializer]
    # slot weights ('.experts.slot<j>.', or '.expert_slot<j>' where the
    # exporter folded the names away) and the routing pick's index
    if not any(".experts.slot" in n or ".expert_slot" in n for n in names):
        raise Failure("the shard has no expert slot weight")
    own = [n for n in names if re.search(r"\.experts\.\d+\.", n)]
    if own:
        raise Failure(f"the shard still holds expert weight '{own[0]}'")


KIND_CHECK = {"ce": vocab_ce_check, "ep": expert_check}


def load_graph(path):
    try:
        import onnx
    except ImportError as e:
        raise Failure(f"python3 cannot import onnx ({e})")
    return onnx.load(path, load_external_data=False).graph


def table(results, manifest):
    variants = []
    for m in manifest["models"]:
        if m["variant"] not in variants:
            variants.append(m["variant"])
    archs = []
    for m in manifest["models"]:
        if m["arch"] not in archs:
            archs.append(m["arch"])
    lines = ["| arch | " + " | ".join(variants) + " |",
             "|---|" + "---|" * len(variants)]
    notes = []
    for a in archs:
        cells = []
        for v in variants:
            r = results.get((a, v))
            if r is None:
                cells.append("—")
            elif r[0] == "pass":
                cells.append("pass" + (f", grads rel {r[2]:.0e}"
                                       if r[2] is not None else ""))
            else:
                if r[1] not in notes:
                    notes.append(r[1])
                label = {"unsupported": "fails", "export": "no export"}.get(
                    r[0], r[0])
                cells.append(f"{label} [{notes.index(r[1]) + 1}]")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines.append("")
    for i, n in enumerate(notes):
        lines.append(f"{i + 1}. {n.replace('|', '/')}")
    return "\n".join(lines) + "\n"


def masked(text):
    """The table without its measured differences (they may move in the
    last digit from one machine to another)."""
    return re.sub(r"\d(\.\d+)?e[-+]\d+", "D", text)


def shard_table(results, shard_results, manifest):
    """A row per model that passes on one rank: per config the max abs diff
    of every rank (against the unsharded run, or torch's for training
    variants), the weights split and the gradients' max abs diff and
    relative error against torch; whether verify passed, and how many of
    its models onnx.checker passed or skipped."""
    labels = [c[0] for c in CONFIGS]
    lines = ["| model | " + " | ".join(labels) + " | verify | onnx.checker |",
             "|---|" + "---|" * (len(CONFIGS) + 2)]
    notes = []

    def note(text):
        if text not in notes:
            notes.append(text)
        return notes.index(text) + 1

    for m in manifest["models"]:
        key = (m["arch"], m["variant"])
        if results.get(key, ("",))[0] != "pass":
            continue
        cells = []
        verified = []
        nok, skips = 0, []
        one = shard_results.get(key + ("checker",))
        if one:
            nok += one[1]
            skips += [one[0]] if one[0] else []
        for c in CONFIGS:
            r = shard_results.get(key + (c[0],))
            if r is None:
                cells.append("—")
                continue
            if r[0] == "pass":
                cells.append(f"{r[1]:.0e}, {r[3]} split"
                             + (f", grads {r[4]:.0e} (rel {r[5]:.0e})"
                                if r[4] is not None else "")
                             + (", own plan" if r[2] == "own" else ""))
                verified.append("ok")
                nok += r[7]
                skips += [r[6]] if r[6] else []
                continue
            n = note(r[1])
            label = "fails" if r[0] == "unsupported" else r[0]
            cells.append(f"{label} [{n}]")
            if r[1].startswith("verify exit"):
                verified.append(f"fails [{n}]")
            elif not r[1].startswith(("plan exit", "shard exit")):
                verified.append("ok")
        vs = sorted(set(verified))
        cells.append(", ".join(vs) if vs else "—")
        checker = f"{nok} ok" if nok else ""
        for sk in sorted(set(skips)):
            checker += (", " if checker else "") + \
                f"{sum(1 for x in skips if x == sk)} runs skipped [{note(sk)}]"
        cells.append(checker or "—")
        lines.append(f"| {m['arch']}/{m['variant']} | " + " | ".join(cells)
                     + " |")
    lines.append("")
    for i, n in enumerate(notes):
        lines.append(f"{i + 1}. {n.replace('|', '/')}")
    return "\n".join(lines) + "\n"


def doc_table(path):
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"run_zoo: {path} has no '{BEGIN}' ... '{END}' markers")
    head, rest = text.split(BEGIN, 1)
    body, tail = rest.split(END, 1)
    return head, body.strip("\n") + "\n", tail


def attempt(fn, *args):
    """fn(*args) as (value, reason, detail): reason None when it passed."""
    try:
        return fn(*args), None, None
    except Failure as e:
        return None, str(e), e.detail
    except subprocess.TimeoutExpired:
        return None, "timed out after 600 s", None


def model_work(a, m):
    """One model's runs, on one rank and (when it passes) sharded: what the
    report loop reads, computed in a worker thread (the work is in ccgraph
    processes)."""
    one = attempt(run_model, a.ccgraph, a.zoo, m, a.work, a.device)
    shards = {}
    if one[1] is None and not a.no_shard:
        with open(sample_plan(m["arch"], CONFIGS[0])) as f:
            base = json.load(f)
        for config in CONFIGS:
            if applies(m, config, base):
                shards[config[0]] = attempt(shard_model, a.ccgraph, a.zoo, m,
                                            a.work, config)
    return one, shards


def gpu_refusal(a, m):
    """Why the GPU cannot be used here (ccgraph's refusal of model m on
    --device cuda), or None when it can."""
    cmd = [a.ccgraph, "run", os.path.join(a.zoo, m["model"]), "--device",
           "cuda"]
    for n, f in m["inputs"].items():
        cmd += ["--input", f"{n}={os.path.join(a.zoo, f)}"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=600)
    text = p.stdout + p.stderr
    if p.returncode == 3 and re.search(
            r"device cuda.*(cudaGetDeviceCount|built without CUDA|"
            r"cannot load|CUDA driver)", text):
        return text.strip().splitlines()[-1]
    return None


def onnx_check(paths, jobs):
    """onnx.checker (full_check) on every path, `jobs` processes of
    onnx_check.py at a time: path -> (status, reason)."""
    paths = sorted(set(paths))
    if not paths:
        return {}
    n = max(1, min(jobs, len(paths)))
    chunks = [paths[i::n] for i in range(n)]
    procs = [subprocess.Popen([sys.executable,
                               os.path.join(HERE, "onnx_check.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for _ in chunks]
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        outs = list(pool.map(lambda pc: pc[0].communicate("\n".join(pc[1])),
                             zip(procs, chunks)))
    got = {}
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            sys.exit(f"run_zoo: onnx_check.py exit {p.returncode}: "
                     f"{err.strip()}")
        for line in out.splitlines():
            r = json.loads(line)
            got[r["path"]] = (r["status"], r["reason"])
    missing = [q for q in paths if q not in got]
    if missing:
        sys.exit(f"run_zoo: onnx_check.py gave no answer for {missing[0]}")
    return got


def checker_outcome(paths, checked, strip):
    """(failure reason or None, skip reason or None, models checked) of
    onnx.checker over one run's models."""
    skip = None
    ok = 0
    for q in paths:
        status, reason = checked[q]
        rel = q
        for prefix in strip:
            rel = rel.replace(prefix.rstrip("/") + "/", "")
        if status == "fail":
            return f"onnx.checker: {rel}: {reason}", None, ok
        if status == "skip":
            skip = skip or f"onnx.checker skipped: {reason}"
        else:
            ok += 1
    return None, skip, ok


def fold_checker(a, done):
    """Runs onnx.checker on every model the runs wrote (one-rank gradient
    models, every rank of every shard and of its backward) and folds its
    verdict into the runs' results: a refused model fails its run; a model
    this checker cannot judge is counted as skipped, with the reason."""
    paths = []
    for one, shards in done.values():
        if one[1] is None and one[0][2]:
            paths.append(one[0][2])
        for v in shards.values():
            if v[1] is None:
                paths += v[0][1]
    checked = onnx_check(paths, a.jobs)
    strip = (a.work, a.zoo)
    out = {}
    for k, (one, shards) in done.items():
        if one[1] is None:
            worst, grel, gmodel = one[0]
            bad, skip, nok = checker_outcome([gmodel] if gmodel else [],
                                             checked, strip)
            one = (None, bad, None) if bad else \
                ((worst, grel, gmodel, skip, nok), None, None)
        folded = {}
        for label, v in shards.items():
            if v[1] is None:
                bad, skip, nok = checker_outcome(v[0][1], checked, strip)
                v = (None, bad, None) if bad else (v[0][0] + (skip, nok),
                                                   None, None)
            folded[label] = v
        out[k] = (one, folded)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ccgraph")
    ap.add_argument("--zoo", default=ZOO)
    ap.add_argument("--work", default=os.path.join(os.getcwd(), "zoo_work"))
    ap.add_argument("--only", help="ARCH or ARCH/VARIANT")
    ap.add_argument("--no-shard", action="store_true",
                    help="one rank only: skip the sharded runs")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="models run at once (default: the CPU count)")
    ap.add_argument("--print-expected", action="store_true",
                    help="print an EXPECTED table of this run's failures "
                    "(to review and paste in when ccgraph changes)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where the one-rank runs run (cuda: no sharded "
                    "runs; exit 77 where no GPU can be used)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", metavar="DOC")
    g.add_argument("--check", metavar="DOC")
    a = ap.parse_args()
    if a.device == "cuda":
        if a.write or a.check:
            ap.error("--write and --check describe the CPU's runs: not with "
                     "--device cuda")
        a.no_shard = True
    a.zoo, a.work = os.path.abspath(a.zoo), os.path.abspath(a.work)
    with open(os.path.join(a.zoo, "MANIFEST.json")) as f:
        manifest = json.load(f)
    for rel, info in manifest["files"].items():
        p = os.path.join(a.zoo, rel)
        if not os.path.exists(p) or sha256(p) != info["sha256"]:
            sys.exit(f"run_zoo: {rel} is missing or differs from "
                     "MANIFEST.json (re-run scripts/make-zoo.py)")
    passed = failed = unsupported = 0
    results = {}
    seen = set()
    shard_results = {}
    shard_seen = set()
    selected = [m for m in manifest["models"]
            if (not a.only or a.only in (m["arch"],
                                          f"{m['arch']}/{m['variant']}"))
            and "export_error" not in m]
    if a.device == "cuda" and selected:
        why = gpu_refusal(a, selected[0])
        if why:
            print(f"SKIP: the GPU cannot be used here: {why}")
            return 77
    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        work = {id(m): pool.submit(model_work, a, m) for m in selected}
    done = fold_checker(a, {k: w.result() for k, w in work.items()})
    for m in manifest["models"]:
        key = (m["arch"], m["variant"])
        name = f"{m['arch']}/{m['variant']}"
        if a.only and a.only not in (m["arch"], name):
            continue
        if "export_error" in m:
            results[key] = ("export", "torch could not export it: "
                            + m["export_error"])
            print(f"{name:28s} not exported by torch: {m['export_error']}")
            continue
        seen.add(key)
        (value, reason, detail), shards = done[id(m)]
        want = EXPECTED.get(key)
        if reason is None:
            worst, grel, _, skip, nok = value
        if reason is None and want is None:
            passed += 1
            results[key] = ("pass", "", grel)
            skipped = m.get("grads_not_initializers")
            print(f"{name:28s} pass (max abs diff {worst:.2g}"
                  + (f"; parameter gradients' relative error {grel:.2g}"
                     if grel is not None else "")
                  + (f"; {skip}" if skip else "") + ")"
                  + (f"; torch parameters that are no initializer, so not "
                     f"compared: {', '.join(skipped)}" if skipped else ""))
        elif reason is None:
            failed += 1
            results[key] = ("pass", "", grel)
            print(f"{name:28s} FAIL: passes but EXPECTED says '{want}' "
                  "(remove its row)")
        elif want == reason:
            unsupported += 1
            results[key] = ("unsupported", reason)
            print(f"{name:28s} unsupported: {reason}"
                  + (f" ({detail})" if detail else ""))
        else:
            failed += 1
            results[key] = ("fail", reason)
            print(f"{name:28s} FAIL: {reason}"
                  + (f" ({detail})" if detail else "")
                  + (f" (EXPECTED says '{want}')" if want else ""))
        if reason is not None or a.no_shard:
            continue
        if reason is None:
            shard_results[key + ("checker",)] = (skip, nok)
        for config in CONFIGS:
            label = config[0]
            skey = key + (label,)
            sname = f"{name} {label}"
            if label not in shards:
                continue
            shard_seen.add(skey)
            value, reason, detail = shards[label]
            if reason is None:
                diff, used, nsplit, gdiff, grel, skip, nok = value
                res = ("pass", diff, used, nsplit, gdiff, grel, skip, nok)
            want = SHARD_EXPECTED.get(skey)
            if reason is None and want is None:
                passed += 1
                shard_results[skey] = res
                print(f"{sname:36s} pass (max abs diff {diff:.2g}; "
                      + (f"parameter gradients against torch {gdiff:.2g}, "
                         f"relative error {grel:.2g}; "
                         if gdiff is not None else "")
                      + f"{nsplit} weights split; "
                      + ("the arch's plan" if used == "arch" else
                         "its own plan: the arch's does not shard it")
                      + f"; onnx.checker: {nok} models ok"
                      + (f", {skip}" if skip else "") + ")")
            elif reason is None:
                failed += 1
                shard_results[skey] = res
                print(f"{sname:36s} FAIL: passes but SHARD_EXPECTED says "
                      f"'{want}' (remove its row)")
            elif want == reason:
                unsupported += 1
                shard_results[skey] = ("unsupported", reason)
                print(f"{sname:36s} unsupported: {reason}"
                      + (f" ({detail})" if detail else ""))
            else:
                failed += 1
                shard_results[skey] = ("fail", reason)
                print(f"{sname:36s} FAIL: {reason}"
                      + (f" ({detail})" if detail else "")
                      + (f" (SHARD_EXPECTED says '{want}')" if want else ""))
    for key in EXPECTED:
        if key not in seen and not a.only:
            failed += 1
            print(f"{key[0]}/{key[1]:18s} FAIL: in EXPECTED but not in the "
                  "manifest (remove its row)")
    for key in SHARD_EXPECTED:
        if key not in shard_seen and not a.only and not a.no_shard:
            failed += 1
            print(f"{key[0]}/{key[1]} {key[2]} FAIL: in SHARD_EXPECTED but "
                  "not run (remove its row)")
    if a.print_expected:
        print("EXPECTED = {")
        for key, r in results.items():
            if r[0] in ("fail", "unsupported"):
                print(f"    {key!r}:\n        {r[1]!r},")
        print("}")
        print("SHARD_EXPECTED = {")
        for key, r in shard_results.items():
            if r[0] in ("fail", "unsupported"):
                print(f"    {key!r}:\n        {r[1]!r},")
        print("}")
    status = 0
    if a.write or a.check:
        doc = a.write or a.check
        head, body, tail = doc_table(doc)
        new = table(results, manifest)
        if not a.no_shard:
            new += "\n" + shard_table(results, shard_results, manifest)
        if a.write:
            with open(doc, "w") as f:
                f.write(head + BEGIN + "\n" + new + END + tail)
            print(f"run_zoo: wrote the table of {doc}")
        elif masked(body) != masked(new):
            print(f"run_zoo: the table of {doc} is stale: run "
                  f"'{' '.join(sys.argv[:2])} --write {doc}'")
            status = 1
    print(f"zoo: {passed} passed, {failed} failed, {unsupported} unsupported")
    return 1 if failed or status else 0


if __name__ == "__main__":
    sys.exit(main())
