#!/usr/bin/env bash
# Runs on the GPU machine, from a folder device_bundle_plan.sh made:
#   bash run.sh <folder> [cudnn lib dir]
# test_gpu_plan (every generated model, conv ones included, against the CPU
# plan), test_cuda_conv, then the server on the KIND_GPU conv repository
# with one gRPC request per precision when a Python with tritonclient is
# there. Full logs go to $OUT (or the folder) when set.
set -u
b=$(cd "$1" && pwd)
cudnn=${2:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib}
logs=${OUT:-$b}
if [ ! -e "$cudnn/libcudnn.so.9" ]; then  # another Python's wheel, or a system copy
  found=$(find /opt /usr -name libcudnn.so.9 2>/dev/null | head -1)
  [ -n "$found" ] && cudnn=$(dirname "$found")
fi
tar -C "$b" -xJf "$b/lib.tar.xz"
export LD_LIBRARY_PATH=$b/lib:$cudnn:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
ls "$cudnn" | grep -m3 libcudnn
ldd "$b/bin/test_gpu_plan" "$b/bin/inferd" | grep "not found" || echo "libraries: all found"
echo "== test_gpu_plan"
timeout 300 "$b/bin/test_gpu_plan" "$b/gpu_plan_models" >"$logs/test_gpu_plan.txt" 2>&1
echo "exit $?"
grep -E "conv|FAIL|fail|error|SKIP|passed|checks" "$logs/test_gpu_plan.txt" | head -60
tail -3 "$logs/test_gpu_plan.txt"
echo "== test_gpu_plan_prepare (batch sizes prepared: nothing captured or tuned after, padding right)"
timeout 300 "$b/bin/test_gpu_plan_prepare" "$b/gpu_plan_models" >"$logs/test_gpu_plan_prepare.txt" 2>&1
echo "exit $?"
grep -E "FAIL|prepared|checks" "$logs/test_gpu_plan_prepare.txt" | head -20
echo "== test_cuda_conv"
timeout 240 "$b/bin/test_cuda_conv" >"$logs/test_cuda_conv.txt" 2>&1
echo "exit $?"
grep -E "FAIL|relayout|fell back|convT graph" "$logs/test_cuda_conv.txt" | head -20
tail -4 "$logs/test_cuda_conv.txt"
echo "== server"
py=
for c in python3 /opt/torch/.venv/bin/python; do
  if "$c" -c "import tritonclient.grpc, numpy" 2>/dev/null; then py=$c; break; fi
done
"$b/bin/inferd" --model-repository "$b/repo" --grpc-port 18001 --http-port 18000 --log-level info \
  >"$logs/inferd.txt" 2>&1 &
pid=$!
for _ in $(seq 1 120); do grep -q "inferd ready" "$logs/inferd.txt" && break; sleep 0.5; done
if [ -n "$py" ]; then
  timeout 120 "$py" "$b/client.py" 127.0.0.1:18001 "$b/gpu_plan_models"
  echo "client exit $?"
else
  # no tritonclient: inferd's own gRPC load generator (no output check, status counts only)
  echo "no Python with tritonclient: inferd-load instead"
  for m in conv_resnet_fp32 conv_resnet_fp16; do
    timeout 60 "$b/bin/inferd-load" -u 127.0.0.1:18001 -m $m -b 2 --concurrency-range 1:4:3 -p 500 -r 3 \
      --json "$logs/load_$m.json" >"$logs/load_$m.txt" 2>&1
    echo "$m: inferd-load exit $?"
    tail -4 "$logs/load_$m.txt"
  done
fi
kill -INT "$pid"
wait "$pid"
echo "server exit $?"
grep -i -E "conv_resnet|conv_transpose|error|cudnn|gpu|final counts" "$logs/inferd.txt" | head -20
