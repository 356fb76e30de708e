#!/usr/bin/env bash
# Issue 15's soak on the GPU machine: two soaks side by side, each with its own server (soak.py starts it and
# drives the load with inferd-load): the seed MLP (fp16, dynamic batching 500 us, 2 instances) and the 4x4096 MLP
# (fp32, same), both from tests/bench/serve_gpu/anchor_repo.py, on one GPU and their own cores.
#
#   device.sh run BIN_DIR DIR [MINUTES]   both soaks at once, waited for, verdicts printed: ONE device call.
#                                         MINUTES (default 9) plus about a minute (repositories, servers, the
#                                         10 s probes, the settling) must fit the call's limit of 600 s.
#   device.sh start BIN_DIR DIR [MINUTES] starts both in a new session (setsid) and returns at once: a device
#                                         call may end while they run (the machine stays warm for the next
#                                         call, which runs wait): for 10 minutes or more
#   device.sh wait DIR [MAX_S]            waits (up to MAX_S, default 900) until both ended; prints each
#                                         summary line and a PASS/FAIL line per bound; exit 0 when both ended
#                                         with every bound met
# BIN_DIR holds bin/inferd and bin/inferd-load. Env: SOAKS ("seed big"; one of them runs it alone), LOAD (0.8),
# MIX (55:5:30:10), GPU (0; GPU_SEED and GPU_BIG give each soak its own, so neither waits on the other's batches:
# on one GPU the 4x4096's p99 had minutes of 150-300 ms beside the seed MLP's load, on its own 2-3 ms, H100/H200,
# 2026-11-26), PROBE_MIX (the probe's mix: default the soak's; "none": valid only), THREADS (3, inferd-load's), PROBE_CONC (64), PERIOD_S (60), WARMUP_S (60), CORES_SEED_SRV / CORES_SEED_LOAD /
# CORES_BIG_SRV / CORES_BIG_LOAD (default: the cores split in halves, each half giving its last 3 cores to
# inferd-load and the rest to the server; no pinning below 8 cores), PYTHON (python3 with numpy, onnx, pytest
# and tritonclient or KSERVE_DESC for anchor_repo.py; PYTHONPATH is passed through). For a rehearsal on a
# CPU build: SEED_VARIANT=cpu:fp32:500:1 BIG_VARIANT=big:cpu:fp32:500:1 (anchor_repo.py's variants), PROBE_S,
# and SOAK_ARGS for soak.py's other options (e.g. "--period-s 5 --warmup-s 5").
set -u
cmd=${1:-}
SOAK_ARGS=${SOAK_ARGS:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PY=${PYTHON:-python3}

# cores BASE HALF -> "SERVER_LIST LOAD_LIST" for the half starting at BASE
cores() {
  local b=$1 h=$2
  echo "$b-$((b + h - 4)) $((b + h - 3))-$((b + h - 1))"
}

start() {
  local B D minutes=${3:-9}
  B=$(cd "$1" && pwd)
  mkdir -p "$2"
  D=$(cd "$2" && pwd)
  local seed_v=${SEED_VARIANT:-gpu:fp16:500:2} big_v=${BIG_VARIANT:-big:gpu:fp32:500:2}
  "$PY" "$ROOT/tests/bench/serve_gpu/anchor_repo.py" "$D/repos" "$seed_v" "$big_v" || exit 1
  local n h
  n=$(nproc)
  h=$((n / 2))
  local seed_srv="" seed_load="" big_srv="" big_load=""
  if [ "$n" -ge 8 ]; then
    read -r seed_srv seed_load <<<"$(cores 0 $h)"
    read -r big_srv big_load <<<"$(cores $h $h)"
  fi
  for which in ${SOAKS:-seed big}; do
    local repo srv ld
    if [ $which = seed ]; then repo=$D/repos/${seed_v//:/_} srv=${CORES_SEED_SRV:-$seed_srv} ld=${CORES_SEED_LOAD:-$seed_load}
    else repo=$D/repos/${big_v//:/_} srv=${CORES_BIG_SRV:-$big_srv} ld=${CORES_BIG_LOAD:-$big_load}; fi
    rm -f "$D/$which.rc"
    local gpu=${GPU:-0}
    if [ $which = seed ]; then gpu=${GPU_SEED:-$gpu}; else gpu=${GPU_BIG:-$gpu}; fi
    CUDA_VISIBLE_DEVICES=$gpu setsid bash -c '"$@" >"'"$D/$which.log"'" 2>&1; echo $? >"'"$D/$which.rc"'"' _ \
      "$PY" "$HERE/soak.py" --repo "$repo" --model simplenet --inferd "$B/bin/inferd" --load-bin "$B/bin/inferd-load" \
      --minutes "$minutes" --load "${LOAD:-0.8}" --mix "${MIX:-55:5:30:10}" --threads "${THREADS:-3}" \
--probe-mix "${PROBE_MIX:-}" --probe-concurrency "${PROBE_CONC:-64}" --period-s "${PERIOD_S:-60}" --warmup-s "${WARMUP_S:-60}" \
      --server-cores "$srv" --load-cores "$ld" --probe-s "${PROBE_S:-10}" --out "$D/$which" $SOAK_ARGS \
      </dev/null >/dev/null 2>&1 &
    echo "soak $which: $minutes min, server cores '${srv:-any}', inferd-load cores '${ld:-any}', GPU $gpu, log $D/$which.log"
  done
}

wait_both() {
  local D=$1 max=${2:-900}
  local end=$(( $(date +%s) + max ))
  local which
  for which in ${SOAKS:-seed big}; do
  while [ ! -f "$D/$which.rc" ]; do
    [ "$(date +%s)" -lt "$end" ] || { echo "soak: still running after ${max}s"; tail -n 3 "$D"/*.log; exit 1; }
    sleep 5
  done
  done
  local rc=0
  for which in ${SOAKS:-seed big}; do
    echo "== soak $which: exit $(cat "$D/$which.rc")"
    grep -E '^\{|^max |^server, period|^(PASS|FAIL) |^bounds:|^inferd-load failed|Error|error' "$D/$which.log" | head -60
    [ "$(cat "$D/$which.rc")" = 0 ] || rc=1
  done
  exit $rc
}

case "$cmd" in
  run)
    [ $# -ge 3 ] || { sed -n 2,26p "$0" >&2; exit 2; }
    start "$2" "$3" "${4:-9}"
    wait_both "$3" $(( $(awk "BEGIN{print int(${4:-9} * 60)}") + 150 ))
    ;;
  start)
    [ $# -ge 3 ] || { sed -n 2,26p "$0" >&2; exit 2; }
    start "$2" "$3" "${4:-10}"
    ;;
  wait) wait_both "$2" "${3:-900}" ;;
  *) sed -n 2,26p "$0" >&2; exit 2 ;;
esac
