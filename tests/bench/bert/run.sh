#!/usr/bin/env bash
# Issue 12's performance goal, one run on the GPU machine, side by side: a BERT-base-shaped encoder
# (12 layers, hidden 768, random weights) at sequence 128, batches 1, 8, 32, 64, FP16, pinned host in
# to pinned host out: PyTorch at its best (bench_torch_bert.py: CUDA graph of the whole pipeline, and
# torch.compile max-autotune) against inferd's engine (bench_engine) on the same weights (the ONNX file
# bench_torch_bert.py exports). From the repository root, after tests/bench/vision/bundle.sh (its
# .devrun-vision/ carries bench_engine and the libraries):
#
#   bash tests/bench/bert/run.sh .devrun-vision        # writes $OUT (default /tmp/bert)
#
# Env: ENGINE_ARGS (more bench_engine flags, e.g. "--gemm-autotune 0,1": the table adds a tuned-vs-untuned part),
#      BATCHES (1,8,32,64), SEQ (128), TORCH_MODES (graph,compile), PRECISION (fp16), PYTHON (the one
# with torch, transformers, onnx, onnxruntime: /opt/torch/.venv/bin/python when present, else python3),
# MODELS (where the 440 MB model goes; not under $OUT, which travels back: /tmp/bert_models).
# Outputs: torch.jsonl, engine.jsonl (one JSON line per cell each), logs, table.md.
set -u
b=$(cd "$1" && pwd)
out=${OUT:-/tmp/bert}
models=${MODELS:-/tmp/bert_models}
batches=${BATCHES:-1,8,32,64}
seq=${SEQ:-128}
prec=${PRECISION:-fp16}
mkdir -p "$out" "$models"
if [ -z "${PYTHON:-}" ]; then
  if [ -x /opt/torch/.venv/bin/python ]; then PYTHON=/opt/torch/.venv/bin/python; else PYTHON=python3; fi
fi
cudnn=$(dirname "$(find /opt /usr -name libcudnn.so.9 2>/dev/null | head -1)")
if [ -f "$b/lib.tar.xz" ] && [ ! -d "$b/lib" ]; then tar -C "$b" -xJf "$b/lib.tar.xz"; fi
export LD_LIBRARY_PATH=$b/lib:$cudnn:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee "$out/machine.txt"

# PyTorch first: it also writes the model bench_engine reads
timeout --foreground 1500 "$PYTHON" "$here/bench_torch_bert.py" --out "$models" --modes "${TORCH_MODES:-graph,compile}" \
  --batches "$batches" --seq "$seq" --precision "$prec" >"$out/torch.jsonl" 2>"$out/torch.log"
echo "torch: exit $?"; tail -5 "$out/torch.log"; cat "$out/torch.jsonl"
if [ ! -f "$models/bert_base.onnx" ]; then echo "no $models/bert_base.onnx: nothing for bench_engine" >&2; exit 1; fi

timeout --foreground 600 "$b/bin/bench_engine" --model "$models/bert_base.onnx" --precision "$prec" --batches "$batches" \
  --seq "$seq" ${ENGINE_ARGS:-} >"$out/engine.jsonl" 2>"$out/engine.log"
echo "bench_engine: exit $?"; tail -5 "$out/engine.log"; cat "$out/engine.jsonl"

"$PYTHON" "$here/table.py" "$out/torch.jsonl" "$out/engine.jsonl" --machine "$out/machine.txt" | tee "$out/table.md"
