#!/usr/bin/env bash
# Server saturation benchmark, one run on the GPU machine: serves the
# mlp4096_fp16 / mlp4096_fp32 repository with inferd and, for each model and
# rows-per-request setting, saturates it with saturate.py (requests/s, rows/s
# and the GPU busy fraction from /metrics).
#
#   tests/bench/serve_gpu/run.sh BIN_DIR OUT_DIR
#
# BIN_DIR holds inferd. Writes OUT_DIR/repo/, OUT_DIR/inferd.log,
# OUT_DIR/saturate.jsonl, OUT_DIR/saturate.md, and prints the results.
# Env: PYTHON (default python3), KIND (instance kind, default KIND_GPU; KIND_CPU
#      for a CPU-only check), MODELS (default "mlp4096_fp16 mlp4096_fp32"),
#      ROWS (default "16 128"), SAT_SECONDS (10), CONCURRENCY (64), PROCS (8),
#      READY_TIMEOUT (seconds to wait for the server, default 600),
#      INFERD_ARGS (extra server flags).
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BIN_DIR OUT_DIR" >&2
  exit 2
fi
BIN_DIR=$1
OUT_DIR=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
KIND=${KIND:-KIND_GPU}
MODELS=${MODELS:-"mlp4096_fp16 mlp4096_fp32"}
ROWS=${ROWS:-"16 128"}
SAT_SECONDS=${SAT_SECONDS:-10}
CONCURRENCY=${CONCURRENCY:-64}
PROCS=${PROCS:-8}
READY_TIMEOUT=${READY_TIMEOUT:-600}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
RES=$OUT_DIR/saturate.jsonl
LOG=$OUT_DIR/inferd.log
: >"$RES"

if [ ! -x "$BIN_DIR/inferd" ]; then
  echo "inferd not found or not executable at $BIN_DIR/inferd" >&2
  exit 1
fi

echo "== repository ($KIND)" >&2
"$PY" "$HERE/../engine/gen_bench_models.py" --repo "$OUT_DIR/repo" --kind "$KIND" --count "${INSTANCES:-1}" || exit 1

echo "== starting inferd" >&2
# shellcheck disable=SC2086
"$BIN_DIR/inferd" --model-repository "$OUT_DIR/repo" --grpc-port 0 --http-port 0 ${INFERD_ARGS:-} \
  >"$OUT_DIR/inferd.stdout" 2>"$LOG" &
PID=$!
stop_server() {
  if kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID"
    wait "$PID"
    echo "inferd stopped (exit $?)" >&2
  fi
}
trap stop_server EXIT

GRPC_PORT='' HTTP_PORT=''
for _ in $(seq 1 $((READY_TIMEOUT * 5))); do
  line=$(grep -m1 '^inferd ready: grpc=' "$LOG" 2>/dev/null || true)
  if [ -n "$line" ]; then
    GRPC_PORT=$(sed -n 's/.*grpc=\([0-9]*\).*/\1/p' <<<"$line")
    HTTP_PORT=$(sed -n 's/.*http=\([0-9]*\).*/\1/p' <<<"$line")
    break
  fi
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "inferd exited before ready:" >&2
    tail -n 30 "$LOG" >&2
    trap - EXIT
    exit 1
  fi
  sleep 0.2
done
if [ -z "$GRPC_PORT" ]; then
  echo "inferd not ready after ${READY_TIMEOUT}s:" >&2
  tail -n 30 "$LOG" >&2
  exit 1
fi
echo "inferd ready: grpc=$GRPC_PORT http=$HTTP_PORT" >&2

for m in $MODELS; do
  for r in $ROWS; do
    echo "== saturate $m rows=$r concurrency=$CONCURRENCY procs=$PROCS seconds=$SAT_SECONDS" >&2
    "$PY" "$HERE/saturate.py" --grpc "127.0.0.1:$GRPC_PORT" --http "127.0.0.1:$HTTP_PORT" --model "$m" \
      --rows "$r" --concurrency "$CONCURRENCY" --procs "$PROCS" --seconds "$SAT_SECONDS" | tee -a "$RES"
    if ! kill -0 "$PID" 2>/dev/null; then
      echo "inferd died during $m rows=$r:" >&2
      tail -n 30 "$LOG" >&2
      break 2
    fi
  done
done

stop_server
trap - EXIT

"$PY" - "$RES" <<'EOF' | tee "$OUT_DIR/saturate.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def f(v, fmt="%.3f"):
    return "n/a" if v is None else fmt % v
print("| model | instances | rows/request | req/s | rows/s | GPU busy (engine, union) | NVML utilization | per-instance busy | mean pending | errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        r["model"], r.get("instances", "-"), r["rows"], r.get("rps", "-"), r.get("rows_per_s", "-"),
        f(r.get("gpu_busy_fraction")), f(r.get("nvml_utilization")), f(r.get("busy_fraction")),
        f(r.get("mean_pending"), "%.1f"), r.get("errors", r.get("error", "-"))))
notes = sorted(set(r["note"] for r in rows if r.get("note")) | set(r["first_error"] for r in rows if r.get("first_error")))
if notes:
    print()
for n in notes:
    print("- " + n)
EOF
