#!/usr/bin/env python3
"""PyTorch at its best on a BERT-base-shaped encoder, the yardstick for bench_engine on the same weights
(issue 12's performance goal).

    bench_torch_bert.py --out DIR [--batches 1,8,32,64] [--seq 128] [--precision fp16]
                        [--modes graph,compile] [--target-seconds 0.5] [--export-only]

Builds transformers' BertModel (12 layers, hidden 768, 12 heads, intermediate 3072, vocab 30522, no
pooler; random weights drawn with seed 0; eval; attn_implementation "sdpa"), saves its weights to
DIR/bert_base.pt (the served benchmark's Python peer loads them) and exports it with the
TorchScript-based exporter (opset 17, dynamic batch and sequence; input_ids, attention_mask INT64 ->
last_hidden_state FP32) to DIR/bert_base.onnx for bench_engine, checked against torch on the CPU with
onnxruntime at batch 2, sequence 16 (one row padded). Then times one batch of

    pinned INT64 ids and mask -> H2D -> model [fp16] -> .float() -> D2H into pinned FP32 [B, seq, 768]

in the modes of tests/bench/engine/torch_timing.py: "torch_graph" (the whole pipeline in one CUDA graph)
and "torch_compile" (torch.compile mode "max-autotune"), each cell "lone" and pipelined. Token ids are
uniform in [0, 30522), the mask all ones, as bench_engine draws them.

An all-ones mask: transformers drops it before SDPA when not tracing (the unmasked kernels are faster),
and that check reads the mask on the host, which a CUDA graph capture forbids. When the capture fails
for that reason the mode is retried with the mask checked on the host once and passed as None, which
is what transformers' eager path does with it; the line then says "mask": "dropped_all_ones".
torch.compile traces, so it keeps the mask ("mask": "kept"). One JSON line per cell, bench_engine's
schema (model "bert_base", as bench_engine names DIR/bert_base.onnx).
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "engine"))
from torch_timing import emit, error_line, log, run_cell  # noqa: E402

MODEL = "bert_base"
VOCAB = 30522
HIDDEN = 768


def build(torch, layers=12, hidden=HIDDEN, heads=12, vocab=VOCAB):
    """The encoder as one module: (input_ids, attention_mask) -> last_hidden_state. Weights from seed 0."""
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=4 * hidden, max_position_embeddings=512,
                     # no pad token: transformers would otherwise look for it in the ids on the host
                     # (a sync) when no mask is given
                     pad_token_id=None, attn_implementation="sdpa")
    torch.manual_seed(0)
    bert = BertModel(cfg, add_pooling_layer=False).eval()
    if getattr(bert.config, "_attn_implementation", "sdpa") != "sdpa":
        raise SystemExit("transformers chose attention %r, not sdpa" % bert.config._attn_implementation)

    class Encoder(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return Encoder(bert).eval()


def export(torch, m, path):
    """TorchScript-based at opset 17 (the brief's); should that exporter fail with the installed
    transformers, the dynamo one at opset 18, said in the log. Returns which one wrote the file."""
    ids = torch.randint(0, VOCAB, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    names = dict(input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"])
    try:
        torch.onnx.export(m, (ids, mask), path, opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                        "attention_mask": {0: "batch", 1: "sequence"},
                                        "last_hidden_state": {0: "batch", 1: "sequence"}}, **names)
        exporter = "ts17"
    except Exception as ex:  # noqa: BLE001 - a finding, reported, and the benchmark goes on
        log("TorchScript-based export failed (%s: %s); exporting with dynamo at opset 18" %
            (type(ex).__name__, (str(ex).splitlines() or [""])[0][:200]))
        b, s = torch.export.Dim("batch", min=1, max=256), torch.export.Dim("sequence", min=2, max=512)
        prog = torch.onnx.export(m, (ids, mask), opset_version=18, dynamo=True,
                                 dynamic_shapes=({0: b, 1: s}, {0: b, 1: s}), **names)
        prog.optimize()
        prog.save(path, external_data=False)
        exporter = "dynamo18"
    import onnxruntime as ort
    rng = np.random.default_rng(1)
    xi = rng.integers(0, VOCAB, (2, 16)).astype(np.int64)
    xm = np.ones((2, 16), np.int64)
    xm[1, 11:] = 0  # one padded row: the mask path is checked too
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"input_ids": xi, "attention_mask": xm})[0]
    with torch.no_grad():
        got = m(torch.from_numpy(xi), torch.from_numpy(xm)).numpy()
    err = float(np.abs(got - ref).max()) / float(np.abs(ref).max())
    log("%s: export vs torch (CPU) max err relative to max|y|: %.2g" % (os.path.basename(path), err))
    if err > 1e-3:
        raise SystemExit("export of %s disagrees with torch" % path)
    return exporter


def cell(torch, mode, model, batch, seq, half, stream, target_s, drop_mask):
    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(batch)
    h_ids = torch.randint(0, VOCAB, (batch, seq), generator=g).pin_memory()
    h_mask = torch.ones(batch, seq, dtype=torch.int64).pin_memory()
    h_out = torch.empty(batch, seq, HIDDEN).pin_memory()
    net = torch.compile(model, mode="max-autotune", dynamic=False) if mode == "compile" else model
    # transformers' own check, done once on the host instead of inside the captured step
    mask_none = drop_mask and bool((h_mask == 1).all())

    def step():
        ids = h_ids.to(dev, non_blocking=True)
        mask = h_mask.to(dev, non_blocking=True)
        y = net(ids, None if mask_none else mask)
        h_out.copy_(y.float() if half else y, non_blocking=True)
    return run_cell(torch, mode, step, stream, target_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="1,8,32,64")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--modes", default="graph,compile")
    ap.add_argument("--target-seconds", type=float, default=0.5)
    ap.add_argument("--export-only", action="store_true")
    a = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(a.out, exist_ok=True)
    m = build(torch)
    torch.save(m.state_dict(), os.path.join(a.out, MODEL + ".pt"))
    exporter = export(torch, m, os.path.join(a.out, MODEL + ".onnx"))
    log("exported %s with %s (torch %s)" % (MODEL, exporter, torch.__version__))
    if a.export_only:
        return
    import transformers
    gpu = torch.cuda.get_device_name(0)
    stream = torch.cuda.Stream()
    for prec in a.precision.split(","):
        half = prec == "fp16"
        model = (m.half() if half else m.float()).cuda()
        with torch.no_grad():
            for mode in a.modes.split(","):
                drop = False  # graph mode: set once a capture needed the mask dropped
                for b in [int(x) for x in a.batches.split(",")]:
                    base = {"tool": "torch_" + mode, "model": MODEL, "precision": prec, "batch": b, "seq": a.seq}
                    for attempt in range(2):
                        try:
                            pipe, lone, it = cell(torch, mode, model, b, a.seq, half, stream, a.target_seconds, drop)
                            emit(dict(base, us_per_batch=round(pipe, 2), lone_us=round(lone, 2), iters=it,
                                      mask="dropped_all_ones" if drop else "kept", attn="sdpa", gpu=gpu,
                                      torch=torch.__version__, transformers=transformers.__version__))
                            break
                        except Exception as ex:
                            if mode == "graph" and not drop and attempt == 0:
                                log("%s batch %d: capture failed (%s); again with the all-ones mask dropped "
                                    "on the host" % (mode, b, (str(ex).splitlines() or [""])[0][:200]))
                                drop = True
                                torch.cuda.synchronize()
                                continue
                            emit(error_line(base, ex))
                            break
                    torch.cuda.empty_cache()
        m = m.float().cpu()


if __name__ == "__main__":
    main()
