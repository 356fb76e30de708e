#!/usr/bin/env bash
# Issue 14's perf_analyzer hang on the GPU machine, in one call (about 7 minutes): why perf_analyzer 2.50 over
# gRPC at concurrency 64 and 256 prints "Pass [1]", "Pass [2]" and then nothing while inferd keeps answering.
# The seed MLP as tests/gpu/perf_analyzer_gpu.sh serves it (gpu:fp16:500:2), then:
#   A  the failing run (gRPC, concurrency 64, time windows of 2000 ms, stability 25 %) under pa_watch.py: when
#      each pass came, the main thread's CPU seconds per pass and after the last one, resident memory; beside
#      it stats_probe.py on its own channel asks ModelStatistics 10 times a second with a 5 s deadline
#   B, C  the same at concurrency 64 and 256 with --request-count (one window of REQUESTS requests)
#   D  stats_probe.py alone: 64 ModelInfer calls in flight on ONE channel with ModelStatistics polled on it,
#      every call with a deadline: an answer inferd loses or holds back shows as a failure or a call never answered
#   E  A again with --measurement-interval 500 (whether short windows are enough on this machine)
# and prints a verdict: perf_analyzer's main thread busy through the silence (its bookkeeping: it collects every
# request record of the window and erases the measured ones from a vector one by one, so each window costs its
# records times those that completed while it collected them, and the next window grows by that time) or
# asleep (waiting on an answer), with the server's side of it (statistics latency under the load, lost answers).
#
#   bash tests/gpu/pa_hang_probe.sh BIN_DIR OUT_DIR      (BIN_DIR holds inferd)
#
# Env: as tests/gpu/perf_analyzer_gpu.sh: PA, PA_BUNDLE, LD_LIBRARY_PATH, PYTHON, KIND (KIND_CPU: a dry run
#      without a GPU, cpu:fp32:500:2), VARIANT, INFERD_ARGS; also REQUESTS (300000), A_S (seconds for run A,
#      100), A_INTERVAL_MS (run A's window, 2000; on a small machine, where the load is ~10 times lower, 20000
#      makes windows of as many requests and hangs the same way), DEADLINE_S (no step starts past this many seconds from the start, 430). stats_probe.py needs grpcio
#      and tritonclient (on the GPU machine: PYTHONPATH=/tmp/site); without them steps D and A's poller are
#      skipped, saying so.
# OUT_DIR: A B C E (pa_watch.py's pa.txt, samples.tsv, watch.json each), A/stats.json, D.json, inferd.log,
#      verdict.txt. Exit status 0 (the verdict is the result), 2 when the server or perf_analyzer cannot start.
set -u
start=$SECONDS
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../script_args.sh"
. "$HERE/pa_serve.sh"
script_args "$@"
BIN=$IN_DIR OUT=$OUT_DIR
pa_variant
REQUESTS=${REQUESTS:-300000}
A_S=${A_S:-100}
A_INTERVAL_MS=${A_INTERVAL_MS:-2000}
DEADLINE_S=${DEADLINE_S:-430}
script_python
pa_find
rm -rf "$OUT/A" "$OUT/B" "$OUT/C" "$OUT/D.json" "$OUT/E" "$OUT/verdict.txt"
pa_repo "$OUT/repo" "$VARIANT"
{
  echo "date: $(date -u '+%F %T UTC'); $(nproc) CPUs; $(LD_LIBRARY_PATH=$PA_LD "$PA" --version 2>&1 | head -n 1)"
  if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; fi
  echo "model: simplenet as $VARIANT ($KIND); gdb: $(command -v gdb || echo none)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"
pa_serve "$MREPO" "$OUT/inferd.log"

PROBE=1
if ! "$PYTHON" -c 'import grpc, tritonclient.grpc.service_pb2_grpc' 2>/dev/null; then
  PROBE=0
  echo "stats_probe.py skipped: no grpcio/tritonclient for $PYTHON (PYTHONPATH=/tmp/site on the GPU machine)" >&2
fi
left() { echo $((DEADLINE_S - (SECONDS - start))); }

# watch NAME TIMEOUT ARGS...: perf_analyzer (gRPC on simplenet, -v) under pa_watch.py into OUT/NAME
watch() {
  local name=$1 t=$2 l
  shift 2
  l=$(left)
  if [ "$l" -lt 20 ]; then echo "== $name: skipped, the deadline ($DEADLINE_S s) has passed" >&2; return; fi
  [ "$t" -gt "$l" ] && t=$l
  echo "== $name: $* (up to $t s)" >&2
  # env execs perf_analyzer in its own process, so the watched pid is perf_analyzer's, with its libraries
  # and not Python's
  "$PYTHON" "$HERE/pa_watch.py" "$OUT/$name" "$t" -- env LD_LIBRARY_PATH="$PA_LD" "$PA" -m simplenet \
    -u "127.0.0.1:$GRPC" -i grpc -v "$@" >/dev/null 2>"$OUT/$name.err"
  tail -n 4 "$OUT/$name/pa.txt" >&2
}

mkdir -p "$OUT/A"
poller=""
if [ "$PROBE" = 1 ]; then
  "$PYTHON" "$HERE/stats_probe.py" --url "127.0.0.1:$GRPC" --concurrency 0 --seconds $((A_S - 5)) \
    --stats-interval 0.1 --json "$OUT/A/stats.json" >/dev/null 2>"$OUT/A/stats.err" &
  poller=$!
fi
watch A "$A_S" --concurrency-range 64:64 --measurement-interval "$A_INTERVAL_MS" --max-trials 10 --stability-percentage 25
if [ -n "$poller" ]; then kill -TERM "$poller" 2>/dev/null; wait "$poller"; fi
watch B 90 --concurrency-range 64:64 --request-count "$REQUESTS"
watch C 90 --concurrency-range 256:256 --request-count "$REQUESTS"
if [ "$PROBE" = 1 ] && [ "$(left)" -gt 40 ]; then
  echo "== D: stats_probe.py, 64 ModelInfer in flight on one channel, 20 s" >&2
  "$PYTHON" "$HERE/stats_probe.py" --url "127.0.0.1:$GRPC" --concurrency 64 --channels 1 --seconds 20 \
    --json "$OUT/D.json" 2>&1 | tail -n 1 >&2
fi
watch E 60 --concurrency-range 64:64 --measurement-interval 500 --max-trials 10 --stability-percentage 25
pa_stop
echo "server: last lines of its log" >>"$OUT/machine.txt"
tail -n 3 "$OUT/inferd.log" >>"$OUT/machine.txt"

"$PYTHON" - "$OUT" <<'PY' | tee "$OUT/verdict.txt"
import json, os, sys
out = sys.argv[1]


def load(path):
    try:
        with open(os.path.join(out, path)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_line(name, w):
    if w is None:
        return "%s: not run" % name
    gaps = ", ".join("%.1f s (main thread %.1f s CPU)" % (p["since_prev_s"], p["main_cpu_s"] or 0) for p in w["passes"])
    a = w["after_last_pass"]
    t = w["since_last_sleep"]
    line = "%s: exit %s; passes after %s" % (name, w["rc"], gaps or "none")
    if w["timed_out"]:
        line += ("; then %.1f s of silence with the main thread at %s s CPU, RSS %s -> %s MiB; since its last "
                 "window sleep %.1f s: %s s CPU, states %s" % (
                     a["seconds"], a["main_cpu_s"], a["rss_mib_at_last_pass"], a["rss_mib_at_end"],
                     t["seconds"], t["main_cpu_s"], t["states"]))
    return line


A, B, C, E = (load("%s/watch.json" % n) for n in "ABCE")
S, D = load("A/stats.json"), load("D.json")
for n, w in zip("ABCE", (A, B, C, E)):
    print(run_line(n, w))
if S:
    print("A's statistics poller: %d calls, p50 %s ms, p99 %s ms, max %s ms, failures %s" % (
        S["stats_calls"], S["stats_p50_ms"], S["stats_p99_ms"], S["stats_max_ms"], S["stats_errors"]))
if D:
    print("D: %d ModelInfer (%.0f/s), failures %s, never answered %d; %d ModelStatistics, max %s ms, failures %s" % (
        D["infer_ok"], D["infer_per_s"], D["infer_errors"], D["infer_unanswered"], D["stats_calls"],
        D["stats_max_ms"], D["stats_errors"]))
verdict = []
if A and A["rc"] == 124:
    t = A["since_last_sleep"]
    # perf_analyzer's main thread after it last slept through a window: runnable (R) nearly all the time is its
    # own computing (on a crowded machine it may get only part of a core, so not CPU seconds alone); asleep
    # somewhere else is a wait, on an answer or a lock
    if t["seconds"] >= 5 and (t["runnable_share"] or 0) >= 0.8:
        verdict.append("A hung with perf_analyzer's main thread computing for the last %.0f s (runnable in %.0f%% "
                       "of the samples, %.1f CPU seconds): its bookkeeping between windows, not a wait on the "
                       "server" % (t["seconds"], 100 * t["runnable_share"], t["main_cpu_s"]))
    elif t["seconds"] >= 5 and (t["runnable_share"] or 0) <= 0.2:
        verdict.append("A hung with perf_analyzer's main thread waiting for the last %.0f s (%s): on an answer or "
                       "a lock, see A/stacks.txt" % (t["seconds"], t["states"]))
    else:
        verdict.append("A hung; the main thread's last %.0f s are unclear (%s): see A/samples.tsv" %
                       (t["seconds"], t["states"]))
elif A:
    verdict.append("A completed (exit %s): the hang did not reproduce" % A["rc"])
if S and (S["stats_errors"] or S["stats_calls"] == 0):
    verdict.append("ModelStatistics failed or never answered under perf_analyzer's load: %s" % S["stats_errors"])
if D:
    lost = D["infer_errors"] or D["infer_unanswered"] or D["stats_errors"] or D["stats_bad"]
    verdict.append("D: inferd %s" % ("LOST or failed answers: see D.json" if lost else
                                     "answered every call within its deadline"))
for n, w in (("B", B), ("C", C)):
    if w:
        verdict.append("%s (--request-count) %s" % (n, "completed" if w["rc"] == 0 else "exit %s" % w["rc"]))
if E:
    verdict.append("E (500 ms windows) %s" % ("completed" if E["rc"] == 0 else "exit %s" % E["rc"]))
print("verdict: " + "; ".join(verdict))
PY
exit 0
