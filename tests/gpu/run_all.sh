#!/usr/bin/env bash
# Runs every GPU test binary in a folder (default build/bin) and sums up:
# passed, skipped (exit 77: no device), failed. Exit status 1 if any failed.
# A folder tests/gpu/pack_bindir.sh made (XZ=1) runs as it is on the GPU machine: its lib.tar.xz is
# unpacked and put on LD_LIBRARY_PATH with the CUDA toolkit's and $PYTHON's (default the device's
# /opt/torch/.venv) nvidia/*/lib folders (cuDNN); and without GPU_PLAN_MODELS or a gpu_plan_models
# folder beside it, test_gpu_plan's models are written first with that Python (gen_test_models.py:
# onnx, onnxruntime).
#   bash tests/gpu/run_all.sh [DIR]
set -u
dir=${1:-build/bin}
pass=0 skip=0 fail=0
py=${PYTHON:-/opt/torch/.venv/bin/python}
[ -x "$py" ] || py=$(command -v python3)
work=
if [ -f "$dir/lib.tar.xz" ] && [ ! -d "$dir/lib" ]; then
  work=$(mktemp -d /tmp/run_all.XXXXXX)
  tar -C "$work" -xJf "$dir/lib.tar.xz" || exit 2
  libs="$work/lib"
  for d in /usr/local/cuda/lib64 "$(dirname "$(dirname "$py")")"/lib/python3*/site-packages/nvidia/*/lib; do
    [ -d "$d" ] && libs="$libs:$d"
  done
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -x "$dir/test_gpu_plan" ] && [ -z "${GPU_PLAN_MODELS:-}" ] && [ ! -d "$dir/../gpu_plan_models" ]; then
  work=${work:-$(mktemp -d /tmp/run_all.XXXXXX)}
  if "$py" "$(cd "$(dirname "$0")/../unit/engine" && pwd)/gen_test_models.py" "$work/gpu_plan_models" >"$work/gen.log" 2>&1; then
    export GPU_PLAN_MODELS="$work/gpu_plan_models"
  else
    echo "gen_test_models.py failed ($py):"; tail -5 "$work/gen.log"
  fi
fi
for t in "$dir"/test_cuda_* "$dir"/test_k_cuda_* "$dir"/test_gpu_*; do
  [ -x "$t" ] || continue
  args=()
  # test_gpu_plan and test_gpu_plan_prepare read the models gen_test_models.py wrote (device_bundle.sh puts them beside bin/)
  case $(basename "$t") in test_gpu_plan | test_gpu_plan_prepare) args=("${GPU_PLAN_MODELS:-$dir/../gpu_plan_models}");; esac
  # test_gpu_llm_step reads the fixture checkpoints device_bundle.sh wrote beside bin/ (llm_ckpts), else
  # writes them with numpy (tests/llm/write_ckpts.py) into a temp folder
  case $(basename "$t") in test_gpu_llm_step)
    if [ -d "${GPU_LLM_CKPTS:-$dir/../llm_ckpts}" ]; then args=("${GPU_LLM_CKPTS:-$dir/../llm_ckpts}")
    else args=("$(mktemp -d)" "${PYTHON:-python3}" "$(cd "$(dirname "$0")/../llm" && pwd)/write_ckpts.py"); fi;;
  esac
  out=$("$t" "${args[@]}" 2>&1); rc=$?
  case $rc in
    0) pass=$((pass + 1)); echo "PASS $(basename "$t")"; echo "$out" | grep "^timing" | sed 's/^/  /';;
    77) skip=$((skip + 1)); echo "SKIP $(basename "$t"): $(echo "$out" | grep -m1 SKIP)";;
    *) fail=$((fail + 1)); echo "FAIL $(basename "$t") (exit $rc)"; echo "$out" | tail -20;;
  esac
done
echo "gpu tests: $pass passed, $skip skipped, $fail failed"
[ $fail -eq 0 ]
