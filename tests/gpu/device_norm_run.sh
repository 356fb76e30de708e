#!/usr/bin/env bash
# Runs on the GPU machine, from a folder device_bundle_norm.sh made, in the
# repository's root:
#   bash <folder>/run.sh <folder> [cudnn lib dir]
# Writes the models with tests/unit/engine/gen_test_models.py (the first
# Python with onnx, onnxruntime and numpy) unless the folder has them, then
# runs the group-norm kernel test (every path, FP32/FP16/BF16, against the C
# reference, then its timings), the other norm kernels' test, and
# test_gpu_plan (the CUDA plan against the CPU plan on every generated
# model, the norm_* models on the device with no host node), then the server
# on KIND_GPU instances of the norm models, FP32 and FP16, against
# onnxruntime (tests/gpu/norm_serve_check.py). Prints each
# exit status and the lines that matter; full logs go to $OUT (or the folder).
set -u
b=$(cd "$1" && pwd)
cudnn=${2:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib}
logs=${OUT:-$b}
if [ ! -e "$cudnn/libcudnn.so.9" ]; then  # another Python's wheel, or a system copy
  found=$(find /opt /usr -name libcudnn.so.9 2>/dev/null | head -1)
  [ -n "$found" ] && cudnn=$(dirname "$found")
fi
tar -C "$b" -xJf "$b/bin.tar.xz"
export LD_LIBRARY_PATH=$b/lib:$cudnn:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
ldd "$b"/bin/* | grep "not found" || echo "libraries: all found"
if [ ! -e "$b/gpu_plan_models/ort_cases.txt" ]; then
  py=
  for c in /opt/torch/.venv/bin/python python3; do
    if "$c" -c "import onnx, onnxruntime, numpy" 2>/dev/null; then py=$c; break; fi
  done
  [ -n "$py" ] || { echo "no Python with onnx, onnxruntime and numpy: cannot write the models"; exit 2; }
  export NORM_PY=$py
  "$py" tests/unit/engine/gen_test_models.py "$b/gpu_plan_models" >"$logs/gen_models.txt" 2>&1 ||
    { echo "gen_test_models.py failed:"; tail -5 "$logs/gen_models.txt"; exit 2; }
  tail -1 "$logs/gen_models.txt"
fi
fail=0
for t in test_k_cuda_groupnorm test_k_cuda_norm; do
  echo "== $t"
  timeout 90 "$b/bin/$t" >"$logs/$t.txt" 2>&1
  rc=$?
  echo "exit $rc"
  [ $rc -eq 0 ] || fail=1
  grep -E "FAIL|fail|bench|checks|SKIP" "$logs/$t.txt" | head -60
done
# test_gpu_plan checks every model; its verdict here is the norm models' alone: all four on the device
# in FP32 and FP16 plans (eight "on the device" lines), and no failure line naming one (other models'
# failures are printed, not counted)
echo "== test_gpu_plan"
timeout 300 "$b/bin/test_gpu_plan" "$b/gpu_plan_models" >"$logs/test_gpu_plan.txt" 2>&1
echo "exit $? (every model)"
grep -E "norm_|FAIL|fail|error|SKIP" "$logs/test_gpu_plan.txt" | head -60
tail -3 "$logs/test_gpu_plan.txt"
on_dev=$(grep -cE "^norm_(instance|group18|group21|group_big) fp(32|16): on the device" "$logs/test_gpu_plan.txt")
norm_bad=$(grep -E "norm_" "$logs/test_gpu_plan.txt" | grep -cE "FAIL|fail|error|differ|over the bound|create|>")
echo "norm models on the device: $on_dev of 8; failure lines naming a norm model: $norm_bad"
[ "$on_dev" -eq 8 ] && [ "$norm_bad" -eq 0 ] || fail=1
echo "== server (KIND_GPU, FP32 and FP16) against onnxruntime"
timeout 150 "${NORM_PY:-/opt/torch/.venv/bin/python}" tests/gpu/norm_serve_check.py "$b/bin/inferd" "$b/gpu_plan_models" \
  >"$logs/norm_serve.txt" 2>&1
rc=$?
echo "exit $rc"
[ $rc -eq 0 ] || fail=1
tail -25 "$logs/norm_serve.txt"
echo "norm device check: $([ $fail -eq 0 ] && echo passed || echo FAILED)"
[ $fail -eq 0 ]
