#!/usr/bin/env bash
# Engine benchmark, one run on the GPU machine: inferd's bench_engine against
# PyTorch eager and CUDA-graph on the same MLPs and the same pipeline.
#
#   tests/bench/engine/run.sh BIN_DIR OUT_DIR
#
# BIN_DIR holds bench_engine (build/bin or .devrun/bin). Writes OUT_DIR/models/,
# OUT_DIR/engine.jsonl (every JSON line), OUT_DIR/failures.txt, OUT_DIR/*.log and
# OUT_DIR/table.md, and prints the table. A missing or failing bench_engine does
# not stop the run: the torch numbers are still measured and the failure is
# listed under the table.
# Env: PYTHON (default python3), BATCHES (default 1,8,64,256,1024),
#      ENGINE_GRAPHS (default "1"; "0 1" also times bench_engine without graphs),
#      ENGINE_ARGS / TORCH_ARGS (extra arguments, e.g. "--iters 200").
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BIN_DIR OUT_DIR" >&2
  exit 2
fi
BIN_DIR=$1
OUT_DIR=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
BATCHES=${BATCHES:-1,8,64,256,1024}
ENGINE_GRAPHS=${ENGINE_GRAPHS:-1}
MODELS="mlp_1024_512_10 mlp_4x4096"
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
JSONL=$OUT_DIR/engine.jsonl
FAIL=$OUT_DIR/failures.txt
: >"$JSONL"
: >"$FAIL"

echo "== models" >&2
if ! "$PY" "$HERE/gen_bench_models.py" --out "$OUT_DIR/models" --check 2>"$OUT_DIR/gen.log"; then
  cat "$OUT_DIR/gen.log" >&2
  echo "gen_bench_models.py failed" >&2
  exit 1
fi
cat "$OUT_DIR/gen.log" >&2

ENGINE=$BIN_DIR/bench_engine
if [ ! -x "$ENGINE" ]; then
  echo "bench_engine not found or not executable at $ENGINE" | tee -a "$FAIL" >&2
  ENGINE=
fi

for m in $MODELS; do
  onnx_path=$OUT_DIR/models/$m.onnx
  if [ -n "$ENGINE" ]; then
    for prec in fp32 fp16; do
      for gr in $ENGINE_GRAPHS; do
        echo "== bench_engine $m $prec graphs=$gr" >&2
        log=$OUT_DIR/bench_engine_${m}_${prec}_g$gr.log
        # shellcheck disable=SC2086
        "$ENGINE" --model "$onnx_path" --precision "$prec" --batches "$BATCHES" --graphs "$gr" ${ENGINE_ARGS:-} \
          >"$log.out" 2>"$log"
        rc=$?
        grep '^{' "$log.out" | tee -a "$JSONL" >&2
        if [ $rc -ne 0 ]; then
          echo "bench_engine $m $prec graphs=$gr: exit $rc: $(tail -n 3 "$log" | tr '\n' ' ')" | tee -a "$FAIL" >&2
        elif ! grep -q '^{' "$log.out"; then
          echo "bench_engine $m $prec graphs=$gr: no JSON lines: $(tail -n 3 "$log" | tr '\n' ' ')" | tee -a "$FAIL" >&2
        fi
      done
    done
  fi
  echo "== bench_torch.py $m" >&2
  log=$OUT_DIR/bench_torch_$m.log
  # shellcheck disable=SC2086
  "$PY" "$HERE/bench_torch.py" --model "$onnx_path" --precision fp32,fp16 --batches "$BATCHES" ${TORCH_ARGS:-} \
    >"$log.out" 2>"$log"
  rc=$?
  cat "$log" >&2
  grep '^{' "$log.out" | tee -a "$JSONL" >&2
  if [ $rc -ne 0 ]; then
    echo "bench_torch.py $m: exit $rc: $(grep -v '^\s*$' "$log" | tail -n 3 | tr '\n' ' ')" | tee -a "$FAIL" >&2
  fi
done

echo "== table" >&2
"$PY" "$HERE/table.py" "$JSONL" --failures "$FAIL" | tee "$OUT_DIR/table.md"
