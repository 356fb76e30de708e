#!/usr/bin/env bash
# Issue 15's soak on the GPU machine: two soaks side by side, each with its own server (soak.py starts it):
# the seed MLP (fp16, dynamic batching 500 us, 2 instances) and the 4x4096 MLP (fp32, same), both from
# tests/bench/serve_gpu/anchor_repo.py, on one GPU (GPU, default 1) and their own cores.
#
#   device.sh start BIN_DIR DIR   starts both in a new session (setsid) and returns at once: a device
#                                 call may end while they run (the machine stays warm for the next call)
#   device.sh wait DIR [MAX_S]    waits (up to MAX_S, default 900) until both ended; prints each summary line
#                                 and bounds; exit 0 when both ended with every bound met
# Env: MINUTES (10), LOAD (0.8), GPU (1), CORES_SEED (16-19), CORES_BIG (20-23), PYTHON (python3 with numpy,
#      onnx, grpcio and tritonclient: PYTHONPATH is passed through), WORKERS (16).
set -u
cmd=${1:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PY=${PYTHON:-python3}
case "$cmd" in
  start)
    B=$(cd "$2" && pwd)
    mkdir -p "$3"
    D=$(cd "$3" && pwd)
    "$PY" "$ROOT/tests/bench/serve_gpu/anchor_repo.py" "$D/repos" gpu:fp16:500:2 big:gpu:fp32:500:2 || exit 1
    for which in seed big; do
      if [ $which = seed ]; then repo=$D/repos/gpu_fp16_500_2 cores=${CORES_SEED:-16-19}
      else repo=$D/repos/big_gpu_fp32_500_2 cores=${CORES_BIG:-20-23}; fi
      rm -f "$D/$which.rc"
      CUDA_VISIBLE_DEVICES=${GPU:-1} setsid taskset -c "$cores" bash -c '"$@" >"'"$D/$which.log"'" 2>&1; echo $? >"'"$D/$which.rc"'"' _ \
        "$PY" "$HERE/soak.py" --repo "$repo" --model simplenet --inferd "$B/bin/inferd" --minutes "${MINUTES:-10}" \
        --load "${LOAD:-0.8}" --workers "${WORKERS:-16}" --out "$D/$which" </dev/null >/dev/null 2>&1 &
      echo "soak $which: started on cores $cores, GPU ${GPU:-1}, log $D/$which.log"
    done
    ;;
  wait)
    D=$2
    end=$(( $(date +%s) + ${3:-900} ))
    while [ ! -f "$D/seed.rc" ] || [ ! -f "$D/big.rc" ]; do
      [ "$(date +%s)" -lt "$end" ] || { echo "soak: still running after ${3:-900}s"; tail -n 3 "$D"/*.log; exit 1; }
      sleep 5
    done
    rc=0
    for which in seed big; do
      echo "== soak $which: exit $(cat "$D/$which.rc")"
      grep -E '^\{|^max |bounds:|^[a-z:]+ +[0-9]+$' "$D/$which.log"
      [ "$(cat "$D/$which.rc")" = 0 ] || rc=1
    done
    exit $rc
    ;;
  *) sed -n 2,14p "$0" >&2; exit 2 ;;
esac
