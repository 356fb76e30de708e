#!/usr/bin/env bash
# CUDA shared memory on a GPU machine, one command:
#   bash tests/gpu/cuda_shm_check.sh <inferd binary> [dir holding tritonclient, for PYTHONPATH]
# Env: PY (a Python with torch, numpy, grpcio, protobuf; default: the first of python3,
# /opt/torch/.venv/bin/python with torch), REPO (a model repository holding the seed "mlp";
# default: generated here with tests/models/gen_models.py, which needs onnx), DEVICE (default 0),
# OUT (where the server log goes; default a temp dir), REGION_DEVICE (where the client's regions live; default
# DEVICE: another one makes the server copy each input from that GPU to the instance's, a peer copy).
# Puts the mlp on a KIND_GPU instance of DEVICE, starts inferd with --allow-client-shm true, runs
# cuda_shm_check.py against it, stops the server. Exit status: the check's (1 on any failure).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:?usage: cuda_shm_check.sh <inferd binary> [tritonclient dir]}
[ $# -ge 2 ] && export PYTHONPATH="$2${PYTHONPATH:+:$PYTHONPATH}"
dev=${DEVICE:-0}
rdev=${REGION_DEVICE:-$dev}
logs=${OUT:-$(mktemp -d)}
py=${PY:-}
if [ -z "$py" ]; then
  for c in python3 /opt/torch/.venv/bin/python; do
    if "$c" -c "import torch, numpy, tritonclient.grpc" 2>/dev/null; then py=$c; break; fi
  done
fi
if [ -z "$py" ]; then
  echo "no Python with torch, numpy and tritonclient.grpc (set PY, pass the tritonclient dir); python3 says:"
  python3 -c "import torch, numpy, tritonclient.grpc" 2>&1 | tail -n 3  # e.g. a protobuf older than tritonclient's
  exit 2
fi
repo=$(mktemp -d)
trap 'rm -rf "$repo"' EXIT
if [ -n "${REPO:-}" ]; then
  cp -r "$REPO/mlp" "$repo/mlp"
else
  "$py" - "$root" "$repo" <<'PYGEN' || exit 2
import sys
sys.path.insert(0, sys.argv[1] + "/tests/models")
import gen_models as g
r = g.Repo(sys.argv[2])
g.add_mlp(r)
PYGEN
fi
# one GPU instance on DEVICE: the regions' own device (REGION_DEVICE unset), or another (a peer copy)
printf 'instance_group [\n  {\n    count: 1\n    kind: KIND_GPU\n    gpus: [ %s ]\n  }\n]\n' "$dev" >>"$repo/mlp/config.pbtxt"
"$bin" --model-repository "$repo" --grpc-port 18101 --http-port 18100 --allow-client-shm true --log-level info \
  >"$logs/inferd_cuda_shm.txt" 2>&1 &
pid=$!
for _ in $(seq 1 240); do grep -q "inferd ready" "$logs/inferd_cuda_shm.txt" && break; sleep 0.5; done
grep -E "CUDA|error" "$logs/inferd_cuda_shm.txt" | head -5
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False timeout 300 "$py" "$here/cuda_shm_check.py" localhost:18101 mlp "$rdev" \
  localhost:18100
rc=$?
kill -TERM "$pid"
wait "$pid"
echo "server exit $?; log: $logs/inferd_cuda_shm.txt"
grep -E "cuda shared memory|ERROR" "$logs/inferd_cuda_shm.txt" | tail -8
exit $rc
