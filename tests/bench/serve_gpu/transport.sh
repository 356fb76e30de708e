#!/usr/bin/env bash
# Issue 13's table in one call: the bare C-core echo (../shared/anchors, the transport ceiling) against inferd
# serving the seed MLP (model simplenet, the anchors' 4 KB request) in several variants, each pinned to the server
# cores with loadc on the others, at 1, 64 and 512 streams; /metrics after each variant (GPU busy, mean batch,
# per-stage means). Writes OUT/transport.jsonl and OUT/transport.md (the table, machine and date).
#
#   tests/bench/serve_gpu/transport.sh INFERD_BIN_DIR OUT_DIR
#
# env: ANCHORS (default /work/shared/anchors; built into OUT/anchors-bin with its build.sh unless ANCHORS_BIN
#        holds loadc and echo_server already), PYTHON (default python3; numpy, onnx, tritonclient),
#      SRV_CORES (default 0-7), LOAD_CORES (default 8-15), CQ (echo CQ threads, default the server core count),
#      VARIANTS (default: the issue's GPU rows, the 100 us delay that serves 64 and 512 streams best of those
#        tried (0, 100, 500 us; 2 or 4 instances; RESULTS.md, 2026-11-26), and the CPU one without batching):
#        "gpu:fp16:100:2 gpu:fp32:100:2 gpu:fp16:500:2 gpu:fp16:-:2 cpu:fp32:-:1 big:gpu:fp32:500:2 big:gpu:fp32:-:2"
#        KIND:PRECISION:DELAY_US|-:INSTANCES (see anchor_repo.py; big: = the 4x4096 MLP),
#      LEVELS (default "1:1:1 4:2:8 8:4:16": loadc THREADS:CHANNELS:INFLIGHT, i.e. 1, 64, 512 streams),
#      SECS (seconds per point, default 4), INFERD_ARGS (extra server flags, e.g. --grpc-threads 8),
#      PEER=1 also runs the anchors' peer.py (needs torch and a GPU),
#      PERF (a perf command, e.g. "perf" or "env LD_LIBRARY_PATH=DIR DIR/perf"): each server is sampled (cpu-clock) for
#        half a point at the last level; the table then splits its CPU per request by thread and library,
#      RESULTS (a file, e.g. tests/bench/RESULTS.md): the table is appended to it under a dated heading (the table's
#        first line names the machine),
#      BASE_BIN (a directory with another inferd, e.g. a build of the commit before a change): each variant is run
#        with it too, right after the same variant with INFERD_BIN_DIR's, as "base <variant>" (before/after in one run).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../script_args.sh"
script_args "$@"
BIN=$IN_DIR OUT=$OUT_DIR
PY=${PYTHON:-python3}
ANCHORS=${ANCHORS:-/work/shared/anchors}
SRV_CORES=${SRV_CORES:-0-7}
LOAD_CORES=${LOAD_CORES:-8-15}
ncores() { local n=0 a b r; for r in ${1//,/ }; do a=${r%-*}; b=${r#*-}; n=$((n + b - a + 1)); done; echo $n; }
CQ=${CQ:-$(ncores "$SRV_CORES")}
VARIANTS=${VARIANTS:-"gpu:fp16:100:2 gpu:fp32:100:2 gpu:fp16:500:2 gpu:fp16:-:2 cpu:fp32:-:1 big:gpu:fp32:500:2 big:gpu:fp32:-:2"}
LEVELS=${LEVELS:-"1:1:1 4:2:8 8:4:16"}
SECS=${SECS:-4}
M=/inference.GRPCInferenceService/ModelInfer
RES=$OUT/transport.jsonl
: >"$RES"

AB=${ANCHORS_BIN:-$OUT/anchors-bin}
if [ ! -x "$AB/loadc" ] || [ ! -x "$AB/echo_server" ]; then bash "$ANCHORS/build.sh" "$AB" >&2 || exit 1; fi
# the request: tritonclient's classes, or the anchors' descriptor where tritonclient is not installed
KSERVE_DESC=${KSERVE_DESC:-$AB/kserve_min.desc} "$PY" "$HERE/anchor_repo.py" "$OUT/repos" $VARIANTS || exit 1
REQ=$OUT/repos/req.bin

PID="" HTTP=""
stop() { if [ -n "$PID" ]; then kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=""; fi; }
trap stop EXIT
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# sweep NAME: loadc at every level against 127.0.0.1:$PORT, one JSON line each into $RES
sweep() {
  local lv t c i
  for lv in $LEVELS; do
    IFS=: read -r t c i <<<"$lv"
    [ -n "${HTTP:-}" ] && curl -s "http://127.0.0.1:$HTTP/metrics" >"$OUT/m_before"
    "$PY" "$HERE/transport_table.py" --threads "$PID" >"$OUT/t_before" 2>/dev/null
    local req=$REQ
    case $1 in *big:*) req=$OUT/repos/req_big.bin ;; esac  # the 4x4096 MLP takes [1, 4096]
    local pp="" pf=""
    if [ -n "${PERF:-}" ] && [ "$lv" = "${LEVELS##* }" ]; then  # a profile at the last level
      pf=$OUT/perf_$(tr -c 'A-Za-z0-9\n' _ <<<"$1")_$((t * c * i))
      # shellcheck disable=SC2086
      (sleep 1; $PERF record -q -e cpu-clock -F 999 -p "$PID" -o "$pf.data" -- sleep $(((SECS + 1) / 2)) >/dev/null 2>&1) &
      pp=$!
    fi
    line=$(taskset -c "$LOAD_CORES" "$AB/loadc" "127.0.0.1:$PORT" $M "$req" "$t" "$c" "$i" "$SECS" | tail -n 1)
    if [ -n "$pp" ]; then
      wait "$pp"
      # shellcheck disable=SC2086
      $PERF report -i "$pf.data" --no-children --sort comm,dso --stdio --percent-limit 0.1 2>/dev/null |
        grep -v '^#' | grep -v '^$' >"$pf.txt"
      rm -f "$pf.data"
    fi
    "$PY" "$HERE/transport_table.py" --threads "$PID" >"$OUT/t_after" 2>/dev/null
    local th
    th=$("$PY" "$HERE/transport_table.py" --threads-delta "$OUT/t_before" "$OUT/t_after" 2>/dev/null)
    local m=null
    if [ -n "${HTTP:-}" ]; then
      curl -s "http://127.0.0.1:$HTTP/metrics" >"$OUT/m_after"
      m=$("$PY" "$HERE/transport_table.py" --delta "$OUT/m_before" "$OUT/m_after")
    fi
    echo "{\"server\": \"$1\", \"streams\": $((t * c * i)), \"loadc\": ${line:-null}, \"metrics\": $m, \"threads\": ${th:-null}}" | tee -a "$RES"
  done
}

echo "== echo_server ($CQ CQ threads on $SRV_CORES)" >&2
PORT=$(free_port)
ECHO_METHOD=$M taskset -c "$SRV_CORES" "$AB/echo_server" "0.0.0.0:$PORT" "$CQ" 64 2 >"$OUT/echo.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
sweep echo
stop

# run_inferd NAME BIN_DIR VARIANT
run_inferd() {
  local name=$1 bin=$2 v=$3 d=${3//:/_} tag=${1// /_}
  tag=${tag//:/_}
  echo "== $name on $SRV_CORES" >&2
  # shellcheck disable=SC2086
  taskset -c "$SRV_CORES" "$bin/inferd" --model-repository "$OUT/repos/$d" --grpc-port 0 --http-port 0 \
    ${INFERD_ARGS:-} >"$OUT/$tag.stdout" 2>"$OUT/$tag.log" &
  PID=$!
  PORT="" HTTP=""
  for _ in $(seq 1 3000); do
    l=$(grep -m1 '^inferd ready: grpc=' "$OUT/$tag.log" 2>/dev/null || true)
    if [ -n "$l" ]; then
      PORT=$(sed -n 's/.*grpc=\([0-9]*\).*/\1/p' <<<"$l"); HTTP=$(sed -n 's/.*http=\([0-9]*\).*/\1/p' <<<"$l"); break
    fi
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.2
  done
  if [ -z "$PORT" ]; then echo "$name did not start: $(tail -n 3 "$OUT/$tag.log")" >&2; stop; return; fi
  sweep "$name"
  curl -s "http://127.0.0.1:$HTTP/metrics" >"$OUT/$tag.metrics" || true
  stop
  HTTP=""
}

for v in $VARIANTS; do
  run_inferd "inferd $v" "$BIN" "$v"
  if [ -n "${BASE_BIN:-}" ]; then run_inferd "base $v" "$(cd "$BASE_BIN" && pwd)" "$v"; fi
done

if [ "${PEER:-0}" = 1 ]; then
  echo "== peer.py (Python batcher)" >&2
  PORT=$(free_port) HTTP=""
  [ "$ANCHORS/peer.py" -ef "$AB/peer.py" ] || cp "$ANCHORS/peer.py" "$AB/"
  # exec: $! is then the Python process itself, whose threads the table reads
  (cd "$AB" && exec taskset -c "$SRV_CORES" "$PY" peer.py "$PORT" batch >"$OUT/peer.log" 2>&1) &
  PID=$!
  for _ in $(seq 1 600); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.2; done
  sweep peer
  stop
fi

"$PY" "$HERE/transport_table.py" "$OUT" "$SRV_CORES" "$LOAD_CORES" | tee "$OUT/transport.md"
if [ -n "${RESULTS:-}" ]; then  # the table into RESULTS.md (or any file) under a dated heading
  { printf '\n## The request path vs the transport: transport.sh, %s\n\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
    cat "$OUT/transport.md"; } >>"$RESULTS"
fi
