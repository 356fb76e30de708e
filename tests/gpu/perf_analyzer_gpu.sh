#!/usr/bin/env bash
# Issue 14's perf_analyzer checks on the GPU machine, in one call: the seed MLP (model simplenet, FP16 plan,
# dynamic batching, 2 KIND_GPU instances; tests/bench/serve_gpu/anchor_repo.py) served by inferd with client
# shared memory allowed, then perf_analyzer at concurrency 1, 64 and 256 over gRPC and HTTP, and with
# --shared-memory cuda and system over both. Per run: exit status, throughput, p99, perf_analyzer's request
# count against the server's success count over the run (/metrics), and for cuda the inputs read device to
# device (inferd_cuda_shm_inputs_total). Prints the table (markdown rows for tests/bench/RESULTS.md; also
# OUT_DIR/table.md) and exits 1 if any run failed.
#
#   bash tests/gpu/perf_analyzer_gpu.sh BIN_DIR OUT_DIR      (BIN_DIR holds inferd)
#
# Env: PA (perf_analyzer; default PA_BUNDLE/bin/perf_analyzer, else perf_analyzer on PATH),
#      PA_BUNDLE (a folder from tests/gpu/bundle_pa.sh: its pa.tar.xz is unpacked there, and its lib/ goes in
#        front of LD_LIBRARY_PATH for perf_analyzer alone),
#      LD_LIBRARY_PATH (taken as it is, for inferd and perf_analyzer: e.g. .devrun/lib:/usr/local/cuda/lib64),
#      PYTHON (numpy and onnx; default /opt/torch/.venv/bin/python where it exists, else python3),
#      KIND (KIND_GPU, or KIND_CPU: the same runs on a CPU instance, no cuda shared memory: a dry run without
#        a GPU), LEVELS ("1 64 256"), SHM_CONCURRENCY (of the shared-memory runs, 64), INTERVAL_MS (2000),
#      TRIALS (perf_analyzer's --max-trials, 10), STABILITY (--stability-percentage, 25: perf_analyzer's 10
#        fails a run whose windows vary more, which is no failure of the server), TIMEOUT (seconds
#        per perf_analyzer run, 120), DEADLINE_S (no run starts past this many seconds from the start, 520,
#        so the table comes out within a 600 s call even when runs hang; a run's timeout is cut to fit),
#      REQUESTS (300000) and COUNT_FROM (64): a level of COUNT_FROM streams or more measures one window of exactly
#        REQUESTS requests (--request-count) instead of time windows until stable (COUNT_FROM 0: time windows
#        everywhere). perf_analyzer 2.50's time windows never end above ~50,000 infer/s: its bookkeeping
#        between two windows costs the window's request records times those completed while it gathers them
#        and lengthens the next window by that time, so each pass takes longer than the last (issue 14;
#        tests/gpu/pa_hang_probe.sh shows it). One counted window has no next window to lengthen,
#      VARIANT (anchor_repo.py's KIND:PRECISION:DELAY_US:COUNT; default gpu:fp16:500:2, cpu:fp32:500:2 on KIND_CPU),
#      INFERD_ARGS (extra server flags).
set -u
start=$SECONDS
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../script_args.sh"
. "$HERE/pa_serve.sh"
script_args "$@"
BIN=$IN_DIR OUT=$OUT_DIR
pa_variant
LEVELS=${LEVELS:-"1 64 256"}
SHM_CONCURRENCY=${SHM_CONCURRENCY:-64}
INTERVAL_MS=${INTERVAL_MS:-2000}
TRIALS=${TRIALS:-10}
STABILITY=${STABILITY:-25}
TIMEOUT=${TIMEOUT:-120}
REQUESTS=${REQUESTS:-300000}
COUNT_FROM=${COUNT_FROM:-64}
DEADLINE_S=${DEADLINE_S:-520}
script_python
pa_find
MODEL=simplenet
rm -rf "$OUT/runs"
mkdir -p "$OUT/runs"
pa_repo "$OUT/repo" "$VARIANT"

{
  echo "date: $(date -u '+%F %T UTC'); $(nproc) CPUs; $(LD_LIBRARY_PATH=$PA_LD "$PA" --version 2>&1 | head -n 1)"
  if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; fi
  echo "perf_analyzer: --measurement-interval $INTERVAL_MS --max-trials $TRIALS --stability-percentage $STABILITY;" \
    "from concurrency $COUNT_FROM (0: never) --request-count $REQUESTS instead"
  echo "model: $MODEL as $VARIANT ($KIND), config:"
  cat "$MREPO/$MODEL/config.pbtxt"
} >"$OUT/machine.txt"

pa_serve "$MREPO" "$OUT/inferd.log"

# snapshot PID FILE: what a perf_analyzer that is still running near its timeout is doing (issue 14 saw it never
# print a result at concurrency 64 on the GPU while the server kept answering): its threads' states and kernel
# waits, its TCP connections' queues (a stalled peer shows as bytes stuck in Send-Q/Recv-Q), the server's
# pending count, how long the server takes to answer a statistics request now, and stacks where gdb exists
snapshot() {
  local pid=$1 f=$2 t
  {
    echo "== $(date -u '+%T') perf_analyzer pid $pid, threads (state, wchan, syscall):"
    for t in /proc/"$pid"/task/*; do
      echo "$(cut -d' ' -f3 "$t/stat" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null) $(cut -d' ' -f1 "$t/syscall" 2>/dev/null) $(cat "$t/comm" 2>/dev/null)"
    done | sort | uniq -c | sort -rn
    echo "== its TCP connections (state, Recv-Q, Send-Q, peer):"
    ss -tnp 2>/dev/null | grep "pid=$pid," | awk '{print $1, $2, $3, $5}' | sort | uniq -c | sort -rn | head -n 20
    echo "== server: pending and a statistics request now"
    grep -E '^nv_inference_pending_request_count' <("$PYTHON" "$HERE/pa_table.py" metrics "$METRICS" /dev/stdout 2>&1)
    "$PYTHON" - "http://127.0.0.1:$HTTP/v2/models/$MODEL/stats" <<'PY' 2>&1
import sys, time, urllib.request
t = time.monotonic()
try:
    n = len(urllib.request.urlopen(sys.argv[1], timeout=10).read())
    print("GET stats: %d bytes in %.1f ms" % (n, (time.monotonic() - t) * 1e3))
except Exception as e:
    print("GET stats failed after %.1f ms: %s" % ((time.monotonic() - t) * 1e3, e))
PY
    if command -v gdb >/dev/null; then
      echo "== stacks: threads with the same frames counted once (innermost first)"
      timeout 20 gdb -p "$pid" -batch -ex "thread apply all bt 16" 2>/dev/null | "$PYTHON" -c '
import collections, re, sys
stacks, cur = collections.Counter(), None
for line in sys.stdin:
    if line.startswith("Thread "):
        if cur is not None:
            stacks[" < ".join(cur)] += 1
        cur = []
    elif line.startswith("#") and cur is not None:
        m = re.match(r"#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", line)
        cur.append(re.sub(r"\(.*|absl::lts_\d+::", "", m.group(1)) if m else "?")
if cur is not None:
    stacks[" < ".join(cur)] += 1
for st, k in stacks.most_common():
    print("%3d  %s" % (k, st))
'
    fi
  } >"$f" 2>&1
}

n=0
# run PROTOCOL CONCURRENCY SHM: one perf_analyzer level, its files under runs/NN_...
run() {
  local proto=$1 conc=$2 shm=$3 d url left t mode=windows
  local meas=(--measurement-interval "$INTERVAL_MS" --max-trials "$TRIALS" --stability-percentage "$STABILITY")
  if [ "$COUNT_FROM" -gt 0 ] && [ "$conc" -ge "$COUNT_FROM" ]; then
    mode=count:$REQUESTS
    meas=(--request-count "$REQUESTS")
  fi
  n=$((n + 1))
  d=$OUT/runs/$(printf '%02d' $n)_${proto}_${conc}_$shm
  mkdir -p "$d"
  echo "$proto $conc $shm $mode" >"$d/spec"
  left=$((DEADLINE_S - (SECONDS - start)))
  if [ "$left" -lt 15 ]; then
    echo skipped >"$d/rc"
    echo "== $proto c=$conc shm=$shm: skipped, the deadline ($DEADLINE_S s) has passed" >&2
    return
  fi
  t=$((TIMEOUT < left ? TIMEOUT : left))
  if [ "$proto" = grpc ]; then url=127.0.0.1:$GRPC; else url=127.0.0.1:$HTTP; fi
  local extra=()
  [ "$shm" != none ] && extra=(--shared-memory "$shm")
  "$PYTHON" "$HERE/pa_table.py" metrics "$METRICS" "$d/m0.txt"
  echo "== $proto c=$conc shm=$shm $mode (timeout $t s)" >&2
  LD_LIBRARY_PATH=$PA_LD "$PA" -m "$MODEL" -u "$url" -i "$proto" \
    --concurrency-range "$conc:$conc" "${meas[@]}" -f "$d/pa.csv" -v "${extra[@]}" >"$d/pa.txt" 2>&1 &
  local pa=$!
  # the watchdog: a snapshot 10 s before the limit if it is still running, then TERM (KILL 10 s later)
  (
    s=""
    trap 'kill $s 2>/dev/null; exit 0' TERM  # stopped early: no sleep outlives it
    nap() { sleep "$1" & s=$!; wait $s; }
    nap $((t > 20 ? t - 10 : t / 2))
    kill -0 "$pa" 2>/dev/null && snapshot "$pa" "$d/hang.txt"
    nap $((t > 20 ? 10 : t - t / 2))
    kill -0 "$pa" 2>/dev/null && { echo timeout >"$d/timed_out"; kill -TERM "$pa"; nap 10; kill -KILL "$pa"; }
  ) >/dev/null 2>&1 &
  local dog=$!
  wait "$pa"
  local rc=$?
  kill "$dog" 2>/dev/null
  wait "$dog" 2>/dev/null
  [ -f "$d/timed_out" ] && rc=124
  echo "$rc" >"$d/rc"
  "$PYTHON" "$HERE/pa_table.py" metrics "$METRICS" "$d/m1.txt"
  grep -E "Request count|Throughput|p99 latency" "$d/pa.txt" | head -n 3 >&2
  if [ "$(cat "$d/rc")" != 0 ]; then echo "-- exit $(cat "$d/rc"); its last lines:" >&2; tail -n 8 "$d/pa.txt" >&2; fi
}

for proto in grpc http; do
  for c in $LEVELS; do run "$proto" "$c" none; done
done
for shm in cuda system; do
  [ "$shm" = cuda ] && [ "$KIND" != KIND_GPU ] && continue  # no device here: nothing to register
  for proto in grpc http; do run "$proto" "$SHM_CONCURRENCY" "$shm"; done
done
pa_stop
echo "server: $(grep -c -E 'ERROR|error' "$OUT/inferd.log") log lines with 'error'; last lines:" >>"$OUT/machine.txt"
tail -n 5 "$OUT/inferd.log" >>"$OUT/machine.txt"

"$PYTHON" "$HERE/pa_table.py" table "$OUT" "$MODEL" >"$OUT/table.md"
rc=$?
cat "$OUT/machine.txt"
echo
cat "$OUT/table.md"
exit $rc
