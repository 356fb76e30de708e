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
# 2026-11-26), PROBE_MIX (the probe's mix: default the soak's; "none": valid only), THREADS (inferd-load's; default
# LOAD_N, or 3 unpinned), PROBE_CONC (64), PERIOD_S (60), WARMUP_S (60), CORES_SEED_SRV / CORES_SEED_LOAD /
# CORES_BIG_SRV / CORES_BIG_LOAD (default: each soak gets a share of the cores, all of them when SOAKS names one,
# a half each for two; of a share of H cores inferd-load gets its last LOAD_N (default 3H/8, rounded: 6 of 16,
# 3 of 8) and the server the rest; no pinning below 8 cores), PYTHON (python3 with numpy, onnx, pytest
# and tritonclient or KSERVE_DESC for anchor_repo.py; PYTHONPATH is passed through). For a rehearsal on a
# CPU build: SEED_VARIANT=cpu:fp32:500:1 BIG_VARIANT=big:cpu:fp32:500:1 (anchor_repo.py's variants), PROBE_S,
# and SOAK_ARGS for soak.py's other options (e.g. "--period-s 5 --warmup-s 5").
#
# Why the client gets 3/8 of a share (6 cores and 6 threads for one soak on 16 cores, not 3): inferd-load costs
# about 37-42 us of CPU per request with the 55:5:30:10 mix and 23-28 us valid-only once a thread carries 14k
# req/s (more per request at lower rates, where every answer wakes it; an expire-kind request ~50 us, most of it
# in gRPC's timer thread), on a 2-core AMD EPYC VM (2026-11-26, tests/bench/soak/client_cost.py; RESULTS.md soak
# item 5). The seed MLP's soak at 52k req/s with the mix needs ~1.9-2.2 such cores: 3 cores ran it at 65-75 %
# on average, and its loop sends before it reads answers, so a busy client shows as late answers, not as lag
# (lease E: valid p99 240-400 ms with lag p99 1-10 ms, 1,457 requests dropped at the client's in-flight cap).
# Three times the estimate takes the client out of the suspects; soak.py's per-period client CPU shows it.
set -u
cmd=${1:-}
SOAK_ARGS=${SOAK_ARGS:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PY=${PYTHON:-python3}

# cores BASE SHARE LOAD -> "SERVER_LIST LOAD_LIST" for the share starting at BASE, its last LOAD cores the client's
cores() {
  local b=$1 h=$2 l=$3
  echo "$b-$((b + h - l - 1)) $((b + h - l))-$((b + h - 1))"
}

start() {
  local B D minutes=${3:-9}
  B=$(cd "$1" && pwd)
  mkdir -p "$2"
  D=$(cd "$2" && pwd)
  local seed_v=${SEED_VARIANT:-gpu:fp16:500:2} big_v=${BIG_VARIANT:-big:gpu:fp32:500:2}
  "$PY" "$ROOT/tests/bench/serve_gpu/anchor_repo.py" "$D/repos" "$seed_v" "$big_v" || exit 1
  local n h l
  n=$(nproc)
  local soaks=(${SOAKS:-seed big})
  h=$n
  [ ${#soaks[@]} -gt 1 ] && h=$((n / 2))
  l=${LOAD_N:-$(((3 * h + 4) / 8))}
  local seed_srv="" seed_load="" big_srv="" big_load="" threads=${THREADS:-3}
  if [ "$n" -ge 8 ]; then
    threads=${THREADS:-$l}
    if [ ${#soaks[@]} -gt 1 ]; then
      read -r seed_srv seed_load <<<"$(cores 0 $h $l)"
      read -r big_srv big_load <<<"$(cores $h $h $l)"
    else  # one soak: the whole machine is its share
      read -r seed_srv seed_load <<<"$(cores 0 $h $l)"
      big_srv=$seed_srv big_load=$seed_load
    fi
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
      --minutes "$minutes" --load "${LOAD:-0.8}" --mix "${MIX:-55:5:30:10}" --threads "$threads" \
--probe-mix "${PROBE_MIX:-}" --probe-concurrency "${PROBE_CONC:-64}" --period-s "${PERIOD_S:-60}" --warmup-s "${WARMUP_S:-60}" \
      --server-cores "$srv" --load-cores "$ld" --probe-s "${PROBE_S:-10}" --out "$D/$which" $SOAK_ARGS \
      </dev/null >/dev/null 2>&1 &
    echo "soak $which: $minutes min, server cores '${srv:-any}', inferd-load cores '${ld:-any}' ($threads threads), GPU $gpu, log $D/$which.log"
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
    [ $# -ge 3 ] || { sed -n 2,34p "$0" >&2; exit 2; }
    start "$2" "$3" "${4:-9}"
    wait_both "$3" $(( $(awk "BEGIN{print int(${4:-9} * 60)}") + 150 ))
    ;;
  start)
    [ $# -ge 3 ] || { sed -n 2,34p "$0" >&2; exit 2; }
    start "$2" "$3" "${4:-10}"
    ;;
  wait) wait_both "$2" "${3:-900}" ;;
  *) sed -n 2,34p "$0" >&2; exit 2 ;;
esac
