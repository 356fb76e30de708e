#!/usr/bin/env bash
# tests/bench/llm/sample_check.sh: one device call for the device sampler (issue 35 item 5): the
# kernel against its C reference id for id with its time per call beside the previous kernel
# (test_k_cuda_sample), the runner's sampled rows against k_sample_rows_ref and eng_llm_sample
# (test_gpu_llm_step, fixture checkpoints written with numpy by tests/llm/write_ckpts.py) and the
# decode step greedy against sampled (bench_llm_decode, Llama-3.2-1B shape, FP16), each under its own
# time limit so one hang leaves the others' output. Run from the repository root on the GPU machine:
#
#   tests/bench/llm/sample_check.sh BINDIR [BATCHES] [STEPS]    (default 1,64,256 and 10)
#
# BINDIR: tests/gpu/pack_bindir.sh's folder (XZ=1: lib.tar.xz, unpacked here into a temporary folder;
# or lib/). PYTHON (default /opt/torch/.venv/bin/python) needs numpy. ~2 minutes on an H200.
# Exit status: the number of parts that failed.
set -u
B="$(cd "${1:?usage: $0 BINDIR [BATCHES] [STEPS]}" && pwd)"
BATCHES="${2:-1,64,256}"
STEPS="${3:-10}"
PY="${PYTHON:-/opt/torch/.venv/bin/python}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -f "$B/lib.tar.xz" ]; then tar -C "$tmp" -xJf "$B/lib.tar.xz"; fi
CUDNN=$("$PY" -c 'import nvidia.cudnn, os; print(os.path.join(nvidia.cudnn.__path__[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="$B/lib:$tmp/lib:${CUDNN:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for d in "$(dirname "$(dirname "$PY")")"/lib/python3*/site-packages/nvidia/*/lib; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
fails=0
part() {  # NAME LIMIT_S TAIL_LINES COMMAND...
  local name=$1 lim=$2 n=$3 t0 rc
  shift 3
  t0=$(date +%s)
  echo "== $name"
  timeout "$lim" "$@" 2>&1 | tail -"$n"
  rc=${PIPESTATUS[0]}
  echo "$name: exit $rc ($(($(date +%s) - t0)) s)"
  [ "$rc" = 0 ] || fails=$((fails + 1))
}
part test_k_cuda_sample 150 30 "$B/test_k_cuda_sample"
mkdir -p "$tmp/ck"
part test_gpu_llm_step 90 8 "$B/test_gpu_llm_step" "$tmp/ck" "$PY" tests/llm/write_ckpts.py
part "bench_llm_decode --steps $STEPS --batches $BATCHES" 150 30 "$B/bench_llm_decode" --steps "$STEPS" --batches "$BATCHES"
exit $fails
