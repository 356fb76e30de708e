#!/usr/bin/env bash
# tests/bench/llm/llm_gpu_bench.sh: issue 35's GPU serving figures (llm_gpu_bench.py says which and how):
# memory bandwidth and the one-stream decode step against the weight-read bound, the batch-64 step
# against weights + KV, 256 concurrent streams (512 in, 256 out) through inferd's HTTP generate_stream
# against transformers' best batched generate(), as a markdown table for tests/bench/RESULTS.md.
#
#   tests/bench/llm/llm_gpu_bench.sh BINDIR [WORKDIR]
#
# BINDIR: a folder with the CUDA build's `inferd` (libraries installed, or in BINDIR or BINDIR/lib);
# with bench_llm_decode there too, its batch 1 and 64 decode steps (the runner alone, no server) are added
# when time is left. WORKDIR (default: a new /tmp folder) gets the ~2.5 GB checkpoint (kept and reused),
# the repository and inferd.log. PYTHON (default /opt/torch/.venv/bin/python): torch with CUDA and
# transformers. Every part has a time limit; the whole is killed at 420 s, and the table prints whatever
# finished. Exit 0 when the server's throughput figure was measured. LLM_BENCH_TC=1 serves with
# tensor_core_prefill on (prefill attention on tensor cores; off by default).
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BINDIR="${1:-}"
if [ -z "$BINDIR" ] || [ ! -x "$BINDIR/inferd" ]; then
  echo "usage: $0 BINDIR [WORKDIR]   (BINDIR must hold an executable 'inferd'; got '${BINDIR}')" >&2
  exit 2
fi
BINDIR="$(cd "$BINDIR" && pwd)"
WORK="${2:-$(mktemp -d /tmp/llm_gpu_bench.XXXXXX)}"
mkdir -p "$WORK"
PY="${PYTHON:-/opt/torch/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
export LD_LIBRARY_PATH="$BINDIR:$BINDIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing="$(ldd "$BINDIR/inferd" 2>/dev/null | grep 'not found' || true)"
if [ -n "$missing" ]; then
  echo "inferd's shared libraries are missing (put them in $BINDIR/lib):" >&2
  echo "$missing" >&2
  exit 2
fi
"$PY" -c 'import torch, transformers; assert torch.cuda.is_available(), "torch sees no GPU"; print("torch", torch.__version__, "transformers", transformers.__version__)' || {
  echo "$PY lacks torch with CUDA or transformers" >&2
  exit 2
}
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.max.memory --format=csv,noheader 2>/dev/null || true
echo "work folder: $WORK"
T0=$(date +%s)
timeout -k 10 360 "$PY" "$HERE/llm_gpu_bench.py" --bin "$BINDIR" --work "$WORK" --budget 340
rc=$?
[ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "(the python part was killed at 360 s: the figures above are what finished)"
left=$((420 - ($(date +%s) - T0)))
if [ -x "$BINDIR/bench_llm_decode" ] && [ $left -gt 40 ]; then
  echo
  echo "bench_llm_decode (the GPU runner alone, ctx 512; $((left - 10)) s left):"
  timeout -k 5 $((left - 10)) "$BINDIR/bench_llm_decode" --dir "$WORK/bench_ckpt" --ctx 512 --batches 1,64 --steps 20 ||
    echo "(bench_llm_decode did not finish: exit $?)"
fi
exit $rc
