#!/usr/bin/env bash
# Where one batch's device time goes, kernel by kernel: Nsight Compute (ncu) on bench_engine with CUDA graphs
# off, only the kernels launched inside the engine's "inferd compute" NVTX range (engine/cuda/plan_cuda_slot.c enqueue:
# every node of a batch; not the copies, not cuDNN's plan building at create), one duration metric each, then
# ncu_table.py groups them by kernel and prints each one's share. On the GPU machine:
#
#   tests/bench/engine/ncu_kernels.sh BENCH_ENGINE MODEL.onnx PRECISION BATCH OUT_DIR [more bench_engine flags]
#
# Writes OUT_DIR/<model>_<precision>_b<batch>.csv (ncu's raw rows) and .md (the table). Several batches of the
# one size are profiled (each plan's warm-up and its timed iteration: bench_engine makes two plans), so the
# table gives shares and launches per profiled batch as counted by the range's first kernel; time per batch is
# bench_engine's own figure (its JSON, in the .log) times the share.
set -u
if [ $# -lt 5 ]; then sed -n 2,10p "$0" >&2; exit 2; fi
be=$1 model=$2 prec=$3 batch=$4 out=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
name=$(basename "$model" .onnx)_${prec}_b${batch}
ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
"$ncu" --nvtx --nvtx-include "inferd compute/" --metrics gpu__time_duration.sum --csv --print-units base \
  "$be" --model "$model" --precision "$prec" --batches "$batch" --graphs 0 --iters 1 --warmup 0 "$@" \
  >"$out/$name.csv" 2>"$out/$name.log"
rc=$?
[ $rc = 0 ] || { echo "ncu: exit $rc"; tail -5 "$out/$name.log"; }
"${PYTHON:-python3}" "$here/ncu_table.py" "$out/$name.csv" --title "$name" | tee "$out/$name.md"
