#!/usr/bin/env bash
# Runs every GPU test binary in a folder (default build/bin) and sums up:
# passed, skipped (exit 77: no device), failed. Exit status 1 if any failed.
set -u
dir=${1:-build/bin}
pass=0 skip=0 fail=0
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
    0) pass=$((pass + 1)); echo "PASS $(basename "$t")";;
    77) skip=$((skip + 1)); echo "SKIP $(basename "$t"): $(echo "$out" | grep -m1 SKIP)";;
    *) fail=$((fail + 1)); echo "FAIL $(basename "$t") (exit $rc)"; echo "$out" | tail -20;;
  esac
done
echo "gpu tests: $pass passed, $skip skipped, $fail failed"
[ $fail -eq 0 ]
