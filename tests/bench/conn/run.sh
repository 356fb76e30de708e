#!/usr/bin/env bash
# One HTTP/2 connection carrying big messages (issue 32), side by side in one run:
#   echo    the anchors' bare C-core echo (/work/shared/anchors/echo_server.c, mode 2: reads the whole
#           request), built here with its 96-byte reply widened to the size of inferd's answer, so it
#           carries the same bytes both ways (the reply is a static buffer: no copy, the ceiling)
#   inferd  the trivial CPU models of conn.py (ResNet-50's and BERT-base s128's tensor sizes, compute
#           negligible), driven by the same loadc and the same request bytes, then by inferd-load over
#           1 and 8 connections and by perf_analyzer (one connection) where it is installed
# Concurrency 1, 16, 64 and 256 over ONE connection; req/s and MB/s (request + reply bytes).
#   bash tests/bench/conn/run.sh [OUTDIR]    from the repository root, after the default build
# Env: SECS (per point, default 3), CONCS ("1 16 64 256"), SHAPES ("bigin bigout"),
#      INFERD_ARGS (extra server flags), ANCHORS (default /work/shared/anchors), PA (perf_analyzer path).
# Numbers are only comparable within one run, and on a machine where client and server share the cores
# (the 2-core dev VM) both are bound by the client too.
set -u
root=$(pwd)
out=${1:-/tmp/conn_bench}
mkdir -p "$out"
secs=${SECS:-3}
concs=${CONCS:-1 16 64 256}
shapes=${SHAPES:-bigin bigout}
anchors=${ANCHORS:-/work/shared/anchors}
py=${PY:-$root/.venv/bin/python}
pa=${PA:-$root/.venv/bin/perf_analyzer}
bin=$root/build/bin
M=/inference.GRPCInferenceService/ModelInfer
ab=$out/anchors
bash "$anchors/build.sh" "$ab" >/dev/null || exit 1
$py tests/bench/conn/conn.py models "$out/models" || exit 1
F="$(pkg-config --cflags --libs grpc libprotobuf-c) -lpthread -lm"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; pids=(); }
trap cleanup EXIT
port_of() { for _ in $(seq 100); do p=$(grep -oE "$2" "$1" | grep -oE '[0-9]+$' | head -1); [ -n "$p" ] && { echo "$p"; return; }; sleep 0.1; done; }
row() { # NAME SHAPE CONC RPS BYTES
  awk -v n="$1" -v s="$2" -v c="$3" -v r="$4" -v b="$5" \
    'BEGIN { printf "{\"who\": \"%s\", \"shape\": \"%s\", \"conc\": %d, \"rps\": %.0f, \"MBps\": %.0f}\n", n, s, c, r, r * b / 1e6 }' |
    tee -a "$out/results.jsonl"
}
loadc_rps() { "$ab/loadc" 127.0.0.1:$1 $M "$2" 1 "$3" "$4" "$secs" 2>>"$out/loadc.err" | grep -oE '"rps": [0-9]+' | grep -oE '[0-9]+$'; }
: >"$out/results.jsonl"
for s in $shapes; do
  req=$out/$s.req
  $py tests/bench/conn/conn.py req "$s" "$req"
  rb=$($py tests/bench/conn/conn.py reply "$s")
  bytes=$(( $(stat -c %s "$req") + rb ))
  # the echo, answering as many bytes as inferd does
  sed 's/static char reply\[96\];/static char reply[REPLY_BYTES];/' "$anchors/echo_server.c" >"$out/echo_$s.c"
  gcc -O2 -DREPLY_BYTES=$rb -o "$out/echo_$s" "$out/echo_$s.c" "$anchors/reflect.c" "$anchors/reflection.pb-c.c" \
    -I"$anchors" $F || exit 1
  ECHO_METHOD=$M "$out/echo_$s" 127.0.0.1:0 2 256 2 >"$out/echo_$s.log" 2>&1 &
  pids+=($!)
  ep=$(port_of "$out/echo_$s.log" 'listening on port [0-9]+')
  for c in $concs; do row echo "$s" "$c" "$(loadc_rps "$ep" "$req" 1 "$c")" "$bytes"; done
  row echo-8conn "$s" 256 "$(loadc_rps "$ep" "$req" 8 32)" "$bytes"
  cleanup
  # inferd
  # shellcheck disable=SC2086
  "$bin/inferd" --model-repository "$out/models" --grpc-port 0 --http-port 0 ${INFERD_ARGS:-} >"$out/inferd_$s.log" 2>&1 &
  pids+=($!)
  ip=$(port_of "$out/inferd_$s.log" 'grpc=[0-9]+')
  for _ in $(seq 100); do grep -q "inferd ready" "$out/inferd_$s.log" && break; sleep 0.1; done
  for c in $concs; do row inferd-loadc "$s" "$c" "$(loadc_rps "$ip" "$req" 1 "$c")" "$bytes"; done
  row inferd-loadc-8conn "$s" 256 "$(loadc_rps "$ip" "$req" 8 32)" "$bytes"
  shape=${s/bigin/input:3,224,224}; shape=${shape/bigout/input_ids:128}
  for conns in 1 8; do
    for c in $concs; do
      [ "$conns" = 8 ] && [ "$c" -lt 8 ] && continue
      "$bin/inferd-load" -u 127.0.0.1:$ip -m "$s" --concurrency-range $c --connections $conns --threads 2 \
        --shape "$shape" --duration-s "$secs" --json "$out/ld.json" >"$out/ld.txt" 2>&1
      r=$($py -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[-1] if isinstance(d,list) else d; print(d.get("throughput_rps", 0))' "$out/ld.json" 2>/dev/null)
      row "inferd-load-${conns}conn" "$s" "$c" "${r:-0}" "$bytes"
    done
  done
  if [ -x "$pa" ]; then
    for c in $concs; do
      timeout 120 "$pa" -m "$s" -i grpc -u 127.0.0.1:$ip --concurrency-range $c --shape "$shape" \
        -p $((secs * 1000)) -r 4 -s 20 -f "$out/pa.csv" >"$out/pa.txt" 2>&1 &
      pp=$!
      sleep $((secs + 1))  # how many connections it opened (tritonclient shares a channel among 6 clients)
      n=$(( $(ss -tn | grep -c ":$ip ") / 2 ))  # both ends are on this machine
      wait $pp
      echo "perf_analyzer $s conc $c: $n connection(s)" | tee -a "$out/pa_conns.txt"
      row perf_analyzer "$s" "$c" "$($py tests/bench/conn/conn.py pa "$out/pa.csv" 2>/dev/null || echo 0)" "$bytes"
    done
  fi
  cleanup
done
