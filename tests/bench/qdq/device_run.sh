#!/usr/bin/env bash
# tests/bench/qdq/device_run.sh: runs on the GPU machine from the repository root, with a
# folder device_bundle.sh made (copied there as run.sh):
#   bash .devrun-qdq/run.sh .devrun-qdq [cudnn lib dir]
# 1. test_k_cuda_quant: the Q/DQ/fake-quant kernels bit for bit against their C references;
# 2. tests/bench/qdq/device_qdq.py: QDQ models on CPU instances (integer form) and GPU
#    instances (float form, fp32 and fp16) against onnxruntime, timed.
# Prints each part's summary; full logs under $OUT (or the folder). About 3-4 minutes.
set -u
b=$(cd "$1" && pwd)
cudnn=${2:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib}
py=${PY:-/opt/torch/.venv/bin/python}
logs=${OUT:-$b}
tar -C "$b" -xJf "$b/lib.tar.xz"
export LD_LIBRARY_PATH=$b/lib:$cudnn:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ldd "$b/bin/inferd" | grep "not found" || echo "libraries: all found"
echo "== test_k_cuda_quant"
timeout 120 "$b/bin/test_k_cuda_quant" >"$logs/test_k_cuda_quant.txt" 2>&1
echo "exit $?"
grep -E "FAIL|differ|device 0|checks" "$logs/test_k_cuda_quant.txt" | head -20
echo "== device_qdq.py"
timeout 420 "$py" tests/bench/qdq/device_qdq.py "$b/bin/inferd" --runs 10 2>&1 | tee "$logs/device_qdq.txt" | \
  grep -v -E "^\[|^WARNING" | head -150
echo "exit ${PIPESTATUS[0]}"
