#!/usr/bin/env bash
# tests/bench/llm/decode_check.sh: one device call for the decode-step kernels (issue 35): the GPU
# kernel checks (test_k_cuda_llm), the runner against the CPU one (test_gpu_llm_step, fixture
# checkpoints written with numpy by tests/llm/write_ckpts.py) and bench_llm_decode (16 layers,
# Llama-3.2-1B shape, FP16, position 512), each under its own time limit so one hang leaves the
# others' output. Run from the repository root on the GPU machine:
#
#   tests/bench/llm/decode_check.sh BINDIR [BATCHES] [STEPS]    (default 1,8,64,256 and 10)
#
# VARIANTS="FLAGS;FLAGS..." runs the bench once per flag set (default ";--no-gemv": the runner's
# defaults (the fused GEMV at one token), then cuBLASLt for all; e.g. ";--no-fuse --no-pdl;--gemv-rows 8").
#
# BINDIR holds the three binaries (tests/gpu/pack_bindir.sh) and lib/ with their libraries
# (tests/gpu/bundle_libs.sh; .xz ones are unpacked here). PYTHON (default /opt/torch/.venv/bin/python)
# needs numpy. Exit status: the number of parts that failed.
set -u
B="${1:?usage: $0 BINDIR [BATCHES] [STEPS]}"
BATCHES="${2:-1,8,64,256}"
STEPS="${3:-10}"
PY="${PYTHON:-/opt/torch/.venv/bin/python}"
for f in "$B"/lib/*.xz; do [ -e "$f" ] && unxz -f "$f"; done
CUDNN=$("$PY" -c 'import nvidia.cudnn, os; print(os.path.join(nvidia.cudnn.__path__[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="$B/lib:${CUDNN:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
fails=0
t0=$(date +%s)
echo "== test_k_cuda_llm"
timeout 60 "$B/test_k_cuda_llm" 2>&1 | tail -15
rc=${PIPESTATUS[0]}; echo "test_k_cuda_llm: exit $rc ($(($(date +%s) - t0)) s)"; [ "$rc" = 0 ] || fails=$((fails + 1))
t0=$(date +%s)
echo "== test_gpu_llm_step"
ck=$(mktemp -d)
timeout 90 "$B/test_gpu_llm_step" "$ck" "$PY" tests/llm/write_ckpts.py 2>&1 | tail -15
rc=${PIPESTATUS[0]}; echo "test_gpu_llm_step: exit $rc ($(($(date +%s) - t0)) s)"; [ "$rc" = 0 ] || fails=$((fails + 1))
rm -rf "$ck"
t0=$(date +%s)
# VARIANTS: the bench's flag sets, ';'-separated, each run in turn (an empty set: the runner's defaults)
IFS=';' read -r -a variants <<<"${VARIANTS:-;--no-gemv}"
for v in "${variants[@]}"; do
  t0=$(date +%s)
  echo "== bench_llm_decode --steps $STEPS --batches $BATCHES $v"
  # shellcheck disable=SC2086  # the variant's flags: separate words
  timeout 150 "$B/bench_llm_decode" --steps "$STEPS" --batches "$BATCHES" $v 2>&1 | tail -30
  rc=${PIPESTATUS[0]}; echo "bench_llm_decode $v: exit $rc ($(($(date +%s) - t0)) s)"; [ "$rc" = 0 ] || fails=$((fails + 1))
done
exit $fails
