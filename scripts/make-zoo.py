#!/usr/bin/env python3
"""Write the model zoo: small random-weight exports of real architectures.

usage: build-zoo-venv/bin/python scripts/make-zoo.py [--out tests/data/zoo]
                                                     [--arch NAME,...]

Needs the pinned environment of scripts/make-zoo-venv.sh (torch,
transformers, onnx, onnxscript, numpy). For every architecture, in the
order of issue 16, it builds a tiny Hugging Face model (seeded weights,
1-2 layers, hidden 32, vocab 256, no dropout, eager attention) and writes
one folder per variant under OUT/<arch>/<variant>/:

  ts_static       torch.onnx.export(dynamo=False), opset 17, static shapes
  ts_dynamic      the same with dynamic batch and sequence axes; its inputs
                  have another shape than the export's example
  ts_train        opset 17, static, a scalar `loss` output (the model's
                  own loss with `labels` as an input), no constant folding
                  so that initializers keep their parameter names
  dynamo_static   torch.onnx.export(dynamo=True), opset 18, static
  dynamo_dynamic  the same with dynamic batch and sequence axes
  dynamo_train    opset 18, static, the loss output of ts_train, not
                  optimized (the optimizer's constant folding would rename
                  transposed weights)

Each folder: model.onnx (data inline), inputs/<name>.npy, outputs/<name>.npy
(torch's eager outputs for those inputs) and, for the train variants,
grads.npz (torch autograd's gradient of `loss` for every parameter, by parameter name).
OUT/MANIFEST.json records the versions, every model with its inputs,
outputs, loss and gradients, the exports torch itself could not make (with
torch's message), and every file with its sha256.

A variant whose export fails is recorded, not fatal: the zoo says what
torch cannot export as well as what ccgraph cannot run.
"""
import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import sys
import traceback
import warnings

import numpy as np
import onnx
import onnxscript
import torch
import transformers as tf

SEED = 16
HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, LAYERS, MAXPOS = 32, 4, 2, 64, 256, 2, 64
STATIC_SHAPE = (2, 8)      # (batch, sequence) of the export's example
DYNAMIC_SHAPE = (3, 5)     # what the dynamic variants are run with
IMAGE = 16                 # ViT: 16x16 RGB, 4x4 patches
MAX_FILE = 5 << 20
MAX_TOTAL = 30 << 20


def text_inputs(kind):
    """Causal/masked LM and encoder inputs."""
    def make(shape, train, rng):
        ids = rng.integers(3, VOCAB, size=shape, dtype=np.int64)
        ins = {"input_ids": ids}
        if train:
            if kind == "encoder":
                ins["target"] = rng.standard_normal(
                    shape + (HIDDEN,)).astype(np.float32)
            else:
                ins["labels"] = rng.integers(3, VOCAB, size=shape,
                                             dtype=np.int64)
        return ins
    return make


def image_inputs(shape, train, rng):
    batch = shape[0]
    ins = {"pixel_values": rng.standard_normal(
        (batch, 3, IMAGE, IMAGE)).astype(np.float32)}
    if train:
        ins["labels"] = rng.integers(0, 10, size=(batch,), dtype=np.int64)
    return ins


NO_DROP = dict(attention_dropout=0.0)

# arch: (config class, model class, config kwargs, kind)
# kind: causal (logits; loss from labels), masked (the same, masked LM),
# encoder (last_hidden_state; loss = mean squared error to `target`),
# image (logits; loss from class labels).
ARCHS = {
    "gpt2": (tf.GPT2Config, tf.GPT2LMHeadModel, dict(
        vocab_size=VOCAB, n_positions=MAXPOS, n_embd=HIDDEN, n_layer=LAYERS,
        n_head=HEADS, n_inner=FFN, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0), "causal"),
    "llama": (tf.LlamaConfig, tf.LlamaForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS, max_position_embeddings=MAXPOS,
        **NO_DROP), "causal"),
    "bert": (tf.BertConfig, tf.BertForMaskedLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=FFN,
        max_position_embeddings=MAXPOS, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), "masked"),
    "mistral": (tf.MistralConfig, tf.MistralForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS, max_position_embeddings=MAXPOS,
        sliding_window=None, **NO_DROP), "causal"),
    "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS, max_position_embeddings=MAXPOS,
        use_sliding_window=False, **NO_DROP), "causal"),
    "opt": (tf.OPTConfig, tf.OPTForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        ffn_dim=FFN, num_attention_heads=HEADS, max_position_embeddings=MAXPOS,
        word_embed_proj_dim=HIDDEN, dropout=0.0, **NO_DROP), "causal"),
    "gpt_neox": (tf.GPTNeoXConfig, tf.GPTNeoXForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=FFN,
        max_position_embeddings=MAXPOS, hidden_dropout=0.0, **NO_DROP),
        "causal"),
    "phi": (tf.PhiConfig, tf.PhiForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        max_position_embeddings=MAXPOS, partial_rotary_factor=0.5,
        resid_pdrop=0.0, embd_pdrop=0.0, **NO_DROP), "causal"),
    "falcon": (tf.FalconConfig, tf.FalconForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, ffn_hidden_size=FFN,
        max_position_embeddings=MAXPOS, hidden_dropout=0.0, **NO_DROP),
        "causal"),
    "roberta": (tf.RobertaConfig, tf.RobertaForMaskedLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=FFN,
        max_position_embeddings=MAXPOS + 2, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), "masked"),
    "t5_encoder": (tf.T5Config, tf.T5EncoderModel, dict(
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN,
        num_layers=LAYERS, num_heads=HEADS, relative_attention_num_buckets=8,
        relative_attention_max_distance=16, dropout_rate=0.0), "encoder"),
    "vit": (tf.ViTConfig, tf.ViTForImageClassification, dict(
        hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=FFN, image_size=IMAGE, patch_size=4, num_channels=3,
        num_labels=10, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), "image"),
    "mixtral": (tf.MixtralConfig, tf.MixtralForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS, max_position_embeddings=MAXPOS,
        num_local_experts=4, num_experts_per_tok=2, sliding_window=None,
        **NO_DROP), "causal"),
}

VARIANTS = ["ts_static", "ts_dynamic", "ts_train", "dynamo_static",
            "dynamo_dynamic", "dynamo_train"]


def build(arch, train):
    """The model with a forward that takes tensors and returns tensors.

    The forward is replaced on a subclass so that parameter names stay the
    Hugging Face ones (no wrapper module prefix)."""
    cfg_cls, model_cls, kwargs, kind = ARCHS[arch]
    torch.manual_seed(SEED)
    cfg = cfg_cls(**kwargs)
    cfg._attn_implementation = "eager"
    model = model_cls(cfg).eval()
    # Hugging Face initializes norms to ones and biases to zeros. Identical
    # initializers are merged by the TorchScript exporter (the gradient of
    # the merged one is then the sum of theirs) and ones hide bugs: jitter
    # every parameter. Tied parameters are one tensor and stay tied.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    base = type(model)
    extra = {"use_cache": False} if kind == "causal" else {}

    if kind == "encoder":
        if train:
            def fwd(self, input_ids, target):
                h = base.forward(self, input_ids=input_ids,
                                 return_dict=True).last_hidden_state
                return ((h - target) ** 2).mean(), h
        else:
            def fwd(self, input_ids):
                return base.forward(self, input_ids=input_ids,
                                    return_dict=True).last_hidden_state
    elif kind == "image":
        if train:
            def fwd(self, pixel_values, labels):
                out = base.forward(self, pixel_values=pixel_values,
                                   labels=labels, return_dict=True)
                return out.loss, out.logits
        else:
            def fwd(self, pixel_values):
                return base.forward(self, pixel_values=pixel_values,
                                    return_dict=True).logits
    else:
        if train:
            def fwd(self, input_ids, labels):
                out = base.forward(self, input_ids=input_ids, labels=labels,
                                   return_dict=True, **extra)
                return out.loss, out.logits
        else:
            def fwd(self, input_ids):
                return base.forward(self, input_ids=input_ids,
                                    return_dict=True, **extra).logits
    model.__class__ = type(base.__name__ + "Zoo", (base,), {"forward": fwd})
    make_inputs = image_inputs if kind == "image" else text_inputs(kind)
    out_names = (["loss", "hidden" if kind == "encoder" else "logits"] if train
                 else ["hidden" if kind == "encoder" else "logits"])
    return model, make_inputs, out_names, kind


def dynamic_axes(names, kind):
    axes = {}
    for n in names:
        if n == "pixel_values":
            axes[n] = {0: "batch"}
        elif n == "target":
            axes[n] = {0: "batch", 1: "sequence"}
        else:
            axes[n] = {0: "batch", 1: "sequence"}
    return axes


def export(model, args, path, in_names, out_names, variant, kind):
    dyn = variant.endswith("dynamic")
    axes = None
    if dyn:
        axes = dynamic_axes(in_names, kind)
        out_axes = {0: "batch"} if kind == "image" else {0: "batch",
                                                         1: "sequence"}
        for n in out_names:
            if n != "loss":
                axes[n] = out_axes
    if variant.startswith("ts"):
        torch.onnx.export(model, args, path, input_names=in_names,
                          output_names=out_names, opset_version=17,
                          dynamic_axes=axes, dynamo=False,
                          do_constant_folding=(variant != "ts_train"))
        proto = onnx.load(path)
    else:
        # dynamic_axes would ask for unbounded dims, which torch.export
        # refuses where the model bounds them (positions <= MAXPOS): let it
        # find the ranges itself.
        auto = torch.export.Dim.AUTO
        shapes = None
        if dyn:
            shapes = {n: {k: auto for k in axes[n]} for n in in_names}
        prog = torch.onnx.export(model, args, None, input_names=in_names,
                                 output_names=out_names, opset_version=18,
                                 dynamic_shapes=shapes, dynamo=True,
                                 optimize=not variant.endswith("train"))
        proto = prog.model_proto
        # The stack traces are half of a small model's bytes and nothing
        # that ccgraph reads; name_scopes and the rest stay.
        for node in proto.graph.node:
            keep = [(p.key, p.value) for p in node.metadata_props
                    if p.key != "pkg.torch.onnx.stack_trace"]
            del node.metadata_props[:]
            for k, v in keep:
                node.metadata_props.add(key=k, value=v)
    # Everything inline: no .data files beside the model.
    onnx.save_model(proto, path, save_as_external_data=False)
    onnx.checker.check_model(path)
    return onnx.load(path)


def export_error(e):
    """The first line of torch's message and of its innermost cause (the
    first line alone is often generic: 'Failed to convert ...')."""
    def line(x):
        msg = "".join(traceback.format_exception_only(type(x), x)).strip()
        return re.sub(r"\x1b\[[0-9;]*m", "", msg.splitlines()[0])[:300]
    root = e
    while root.__cause__ is not None:
        root = root.__cause__
    return line(e) if root is e else line(e) + " <- " + line(root)


def save_npy(path, arr):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.array(arr, order="C"))  # ascontiguousarray makes 0-d 1-d


def make_variant(arch, variant, root, rng_seed):
    train = variant.endswith("train")
    model, make_inputs, out_names, kind = build(arch, train)
    shape = DYNAMIC_SHAPE if variant.endswith("dynamic") else STATIC_SHAPE
    rng = np.random.default_rng(rng_seed)
    example = make_inputs(STATIC_SHAPE, train, rng)
    run_inputs = make_inputs(shape, train, rng) if shape != STATIC_SHAPE \
        else example
    in_names = list(example)
    d = os.path.join(root, arch, variant)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    entry = {"arch": arch, "variant": variant, "dir": f"{arch}/{variant}",
             "model": f"{arch}/{variant}/model.onnx",
             "exporter": "dynamo" if variant.startswith("dynamo")
             else "torchscript",
             "dynamic": variant.endswith("dynamic"),
             "inputs": {}, "outputs": {}}
    args = tuple(torch.from_numpy(example[n]) for n in in_names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            proto = export(model, args, os.path.join(d, "model.onnx"),
                           in_names, out_names, variant, kind)
        except Exception as e:  # torch's own failure: record it
            shutil.rmtree(d, ignore_errors=True)
            entry["export_error"] = export_error(e)
            return entry
    if entry["dynamic"]:
        # torch 2.6's decompositions can specialize a dynamic dim (it warns
        # 'Ignored guard s0 == 2') and names the dim after its value: such
        # a model is static, and running it on other shapes tests nothing.
        fixed = [f"{i.name}[{k}]={x.dim_param}"
                 for i in proto.graph.input
                 for k, x in enumerate(i.type.tensor_type.shape.dim)
                 if x.dim_param.isdigit()]
        if fixed:
            shutil.rmtree(d, ignore_errors=True)
            entry["export_error"] = ("torch specialized the dynamic dims "
                                     "to the example's: " + ", ".join(fixed))
            return entry
    for n in in_names:
        rel = f"{arch}/{variant}/inputs/{n}.npy"
        save_npy(os.path.join(root, rel), run_inputs[n])
        entry["inputs"][n] = rel
    targs = tuple(torch.from_numpy(run_inputs[n]) for n in in_names)
    if train:
        for p in model.parameters():
            p.grad = None
        outs = model(*targs)
        outs[0].backward()
    else:
        with torch.no_grad():
            outs = model(*targs)
    if not isinstance(outs, tuple):
        outs = (outs,)
    graph_outs = [o.name for o in proto.graph.output]
    for n, t in zip(out_names, outs):
        assert n in graph_outs, (arch, variant, n, graph_outs)
        rel = f"{arch}/{variant}/outputs/{n}.npy"
        save_npy(os.path.join(root, rel), t.detach().numpy())
        entry["outputs"][n] = rel
    if train:
        inits = {i.name for i in proto.graph.initializer}
        grads, absent = {}, []
        # A tied parameter (lm_head.weight is transformer.wte.weight) has
        # several names; each exporter names its initializer after one.
        aliases = {}
        for name, p in model.named_parameters(remove_duplicate=False):
            aliases.setdefault(id(p), []).append(name)
        for name, p in model.named_parameters():
            if p.grad is None:
                continue
            found = [n for n in aliases[id(p)] if n in inits]
            if found:
                grads[found[0]] = p.grad.numpy().astype(np.float32)
            else:
                absent.append(name)
        rel = f"{arch}/{variant}/grads.npz"
        np.savez(os.path.join(root, rel), **grads)
        entry["loss"] = "loss"
        entry["grads"] = rel
        entry["grad_params"] = sorted(grads)
        if absent:
            entry["grads_not_initializers"] = absent
    entry["input_shapes"] = {
        i.name: [x.dim_param or x.dim_value
                 for x in i.type.tensor_type.shape.dim]
        for i in proto.graph.input}
    return entry


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
        "zoo"))
    ap.add_argument("--arch", help="comma-separated subset (default: all)")
    ap.add_argument("--variant", help="comma-separated subset (default: "
                    "all); the manifest keeps the other models")
    a = ap.parse_args()
    root = os.path.normpath(a.out)
    archs = a.arch.split(",") if a.arch else list(ARCHS)
    os.makedirs(root, exist_ok=True)
    man_path = os.path.join(root, "MANIFEST.json")
    old = {}
    if (a.arch or a.variant) and os.path.exists(man_path):
        with open(man_path) as f:
            for m in json.load(f)["models"]:
                old[(m["arch"], m["variant"])] = m
    torch.set_num_threads(2)
    for ai, arch in enumerate(archs):
        for vi, variant in enumerate(VARIANTS):
            if a.variant and variant not in a.variant.split(","):
                continue
            e = make_variant(arch, variant, root, SEED * 100 + vi)
            old[(arch, variant)] = e
            print(f"{arch:10s} {variant:15s} "
                  + (("export failed: " + e["export_error"])
                     if "export_error" in e else "ok"), flush=True)
    order = {k: i for i, k in enumerate(
        (ar, v) for ar in ARCHS for v in VARIANTS)}
    models = [old[k] for k in sorted(old, key=lambda k: order[k])]
    files, total = {}, 0
    for dirpath, _, names in os.walk(root):
        for n in sorted(names):
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root).replace(os.sep, "/")
            if rel == "MANIFEST.json":
                continue
            size = os.path.getsize(p)
            if size > MAX_FILE:
                sys.exit(f"make-zoo: {rel} is {size} bytes (limit {MAX_FILE})")
            total += size
            files[rel] = {"sha256": sha256(p), "bytes": size}
    if total > MAX_TOTAL:
        sys.exit(f"make-zoo: the zoo is {total} bytes (limit {MAX_TOTAL})")
    manifest = {
        "made_by": "scripts/make-zoo.py",
        "versions": {"python": platform.python_version(),
                     "torch": torch.__version__,
                     "transformers": tf.__version__,
                     "onnx": onnx.__version__,
                     "onnxscript": onnxscript.__version__,
                     "numpy": np.__version__},
        "config": {"hidden": HIDDEN, "heads": HEADS, "kv_heads": KV_HEADS,
                   "ffn": FFN, "vocab": VOCAB, "layers": LAYERS,
                   "static_shape": STATIC_SHAPE, "dynamic_shape":
                   DYNAMIC_SHAPE, "seed": SEED},
        "models": models,
        "files": dict(sorted(files.items())),
        "total_bytes": total,
    }
    with open(man_path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"make-zoo: {len(models)} models, {len(files)} files, "
          f"{total} bytes")


if __name__ == "__main__":
    main()
