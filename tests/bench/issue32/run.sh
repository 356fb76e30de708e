#!/usr/bin/env bash
# Issue 32's done-when figures in one call on the GPU machine, side by side (README.md beside this file):
#   1. PyTorch's best offline rate (offline.py: CUDA graph, FP16; ResNet-50 channels_last batch 128, BERT-base s128
#      batch 64), the same process exporting both models (torchvision / transformers, seeded random weights, opset 17);
#   2. ResNet-50 FP16 on 2 GPU instances (max_queue_delay_microseconds 2000, max_batch 128; repo.py): a fresh
#      server, and from the moment it says ready inferd-load keeps 256 one-image FP32 requests in flight over 8
#      gRPC connections for COLD_S s, one report a second (the cold start: first half against the last half), then
#      the lazy-prepare counters; then steady points of SECS s: inferd-load over gRPC, through system shared
#      memory and (KIND_GPU) through CUDA shared memory; perf_analyzer at concurrency 256 over gRPC, system and CUDA shared memory (one counted window);
#   3. BERT-base s128 FP16 (max_batch 64) the same way, without the cold part;
#   4. the markdown table (table.py) for tests/bench/RESULTS.md, also written to $OUT/table.md.
# Every step runs under `timeout`, cut to fit DEADLINE_S from the start, so the table prints even when a step hangs.
#
#   bash tests/bench/issue32/run.sh BUNDLE          (BUNDLE: the folder bundle.sh wrote, e.g. .devrun-i32)
#
# Env: OUT (logs, JSON and the table; default /tmp/issue32), KIND (KIND_GPU, or KIND_CPU: the dry run without a
#   GPU: stand-in models, onnxruntime as the yardstick, no CUDA shared memory, short points), SECS (steady point,
#   8), COLD_S (the cold-start run, 20), PA_S and PA_FRAC (perf_analyzer's counted window aims at PA_S s at PA_FRAC
#   of inferd-load's rate: 6, 0.5), PA_TIMEOUT (40), PA_RESERVE (110: seconds perf_analyzer leaves for the next
#   model), CONC (256), CONNS (8), THREADS (inferd-load threads, 8), COUNT (instances, 2), DELAY_US (2000),
#   MBS_RESNET (128), MBS_BERT (64), SEQ (128), OFFLINE_S (PyTorch's timed seconds per model, 2), DEADLINE_S (480),
#   READY_S (longest wait for a server to say ready, 150), MODELS ("resnet50 bert_base"), INFERD_ARGS (more server
#   flags), PA_ARGS (more perf_analyzer flags, e.g. "--async --max-threads 1" for fewer connections: perf_analyzer
#   2.50 shares one per 6 of its sync workers, ~43 at 256), PYTHON (torch, onnx, onnxruntime, numpy:
#   /opt/torch/.venv/bin/python where it exists), PA (a perf_analyzer to use when BUNDLE has no pa.tar.xz),
#   SRV_CPUS / LOAD_CPUS (taskset lists; default 0-7 and 8-15 on 16 or more cores, none below), COLDSTART (1, the
#   KIND_GPU default: at the end, when COLD_S + 75 s are left, tests/bench/coldstart/run.sh in its own setting, one
#   instance, max_batch COLD_MBS 256, for COLD_S s; 0, the KIND_CPU default: not, as that script serves KIND_GPU).
set -u
T0=$SECONDS
b=$(cd "${1:?usage: run.sh BUNDLE}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bench/issue32/conns.sh
. "$here/conns.sh"
root=$(cd "$here/../../.." && pwd)
out=${OUT:-/tmp/issue32}
KIND=${KIND:-KIND_GPU}
case $KIND in
  KIND_GPU) kind=gpu ;;
  KIND_CPU) kind=cpu ;;
  *) echo "KIND is KIND_GPU or KIND_CPU, not $KIND" >&2; exit 2 ;;
esac
if [ $kind = gpu ]; then d_secs=8 d_cold=20 d_pas=6 d_conc=256 d_mbr=128 d_mbb=64 d_seq=128 d_off=2 d_dead=480 d_prec=fp16 d_cs=1
else d_secs=2 d_cold=4 d_pas=2 d_conc=32 d_mbr=16 d_mbb=16 d_seq=64 d_off=1 d_dead=300 d_prec=fp32 d_cs=0; fi
SECS=${SECS:-$d_secs} COLD_S=${COLD_S:-$d_cold} PA_S=${PA_S:-$d_pas} PA_FRAC=${PA_FRAC:-0.5} PA_TIMEOUT=${PA_TIMEOUT:-40}
CONC=${CONC:-$d_conc} CONNS=${CONNS:-8} THREADS=${THREADS:-8} COUNT=${COUNT:-2} DELAY_US=${DELAY_US:-2000}
MBS_RESNET=${MBS_RESNET:-$d_mbr} MBS_BERT=${MBS_BERT:-$d_mbb} SEQ=${SEQ:-$d_seq} OFFLINE_S=${OFFLINE_S:-$d_off}
DEADLINE_S=${DEADLINE_S:-$d_dead} READY_S=${READY_S:-150} MODELS=${MODELS:-resnet50 bert_base}
if [ -z "${PYTHON:-}" ]; then
  if [ -x /opt/torch/.venv/bin/python ]; then PYTHON=/opt/torch/.venv/bin/python
  elif [ -x "$root/.venv/bin/python" ]; then PYTHON=$root/.venv/bin/python
  else PYTHON=python3; fi
fi
export PYTHONUNBUFFERED=1
rm -rf "$out"
mkdir -p "$out"
models=/tmp/issue32_models repo=/tmp/issue32_repo  # not under $OUT: only logs and JSON travel back

# --- where things are
if [ -f "$b/bundle.tar.xz" ] && [ ! -x "$b/bin/inferd" ]; then tar -C "$b" -xJf "$b/bundle.tar.xz"; fi
if [ -f "$b/lib.tar.xz" ] && [ ! -d "$b/lib" ]; then tar -C "$b" -xJf "$b/lib.tar.xz"; fi  # older bundles
cudnn=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
[ -e "$cudnn/libcudnn.so.9" ] || cudnn=$(dirname "$(find /opt /usr -name libcudnn.so.9 2>/dev/null | head -n 1)")
export LD_LIBRARY_PATH=$b/lib:$cudnn:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
PA_LD=$LD_LIBRARY_PATH
if [ -f "$b/pa.tar.xz" ]; then
  if [ ! -x "$b/pa/bin/perf_analyzer" ]; then mkdir -p "$b/pa" && tar -C "$b/pa" -xJf "$b/pa.tar.xz"; fi
  PA=$b/pa/bin/perf_analyzer
  PA_LD=$b/pa/lib:$LD_LIBRARY_PATH  # its libcudart.so.12 for it alone: inferd keeps CUDA 13's
fi
PA=${PA:-$(command -v perf_analyzer || true)}
[ -z "$PA" ] && [ -x "$root/.venv/bin/perf_analyzer" ] && PA=$root/.venv/bin/perf_analyzer
if [ -n "$PA" ] && ! LD_LIBRARY_PATH=$PA_LD timeout 20 "$PA" --version >/dev/null 2>&1; then
  echo "perf_analyzer ($PA) does not run: its rows are left out" >&2
  LD_LIBRARY_PATH=$PA_LD timeout 20 "$PA" --version 2>&1 | tail -n 3 >&2
  PA=""
fi
pin_srv=() pin_load=()
if [ "$(nproc)" -ge 16 ]; then
  pin_srv=(taskset -c "${SRV_CPUS:-0-7}") pin_load=(taskset -c "${LOAD_CPUS:-8-15}")
elif [ -n "${SRV_CPUS:-}" ]; then
  pin_srv=(taskset -c "$SRV_CPUS") pin_load=(taskset -c "${LOAD_CPUS:-$SRV_CPUS}")
fi

left() { echo $((DEADLINE_S - (SECONDS - T0))); }
# cap N: N, or what is left before the deadline less a margin for the table, whichever is smaller (>= 1)
cap() { local l; l=$(($(left) - 15)); [ "$l" -lt 1 ] && l=1; echo $(($1 < l ? $1 : l)); }
step() { echo "[$(printf '%4d' $((SECONDS - T0))) s] $*"; }

{
  echo "date: $(date -u '+%F %T UTC'); $(nproc) CPUs; kind $KIND"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "commit: $(cat "$b/commit.txt" 2>/dev/null || git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "perf_analyzer: ${PA:-none}$([ -n "$PA" ] && LD_LIBRARY_PATH=$PA_LD "$PA" --version 2>&1 | head -n 1 | sed 's/^/ /')"
  echo "settings: CONC=$CONC CONNS=$CONNS THREADS=$THREADS COUNT=$COUNT DELAY_US=$DELAY_US MBS_RESNET=$MBS_RESNET" \
    "MBS_BERT=$MBS_BERT SEQ=$SEQ SECS=$SECS COLD_S=$COLD_S PA_S=$PA_S PA_FRAC=$PA_FRAC" \
    "server cores ${pin_srv[*]:-any}, load cores ${pin_load[*]:-any}; INFERD_ARGS=${INFERD_ARGS:-}"
} | tee "$out/machine.txt"

# --- 1. the models and PyTorch's offline rate (nothing else on the GPU meanwhile)
step "offline.py: export both models, time PyTorch's best"
rm -rf "$models"
timeout -k 5 "$(cap 200)" "$PYTHON" "$here/offline.py" --out "$models" --kind $kind --target-seconds "$OFFLINE_S" \
  --vision-batch "$MBS_RESNET" --bert-batch "$MBS_BERT" --seq "$SEQ" >"$out/offline.jsonl" 2>"$out/offline.log"
step "offline.py: exit $?"
cat "$out/offline.jsonl"
grep -E "exported|failed|disagrees" "$out/offline.log"
rm -rf "$repo"
"$PYTHON" "$here/repo.py" "$models" "$repo" --kind $kind --count "$COUNT" --delay-us "$DELAY_US" \
  --max-batch-resnet50 "$MBS_RESNET" --max-batch-bert_base "$MBS_BERT" --seq "$SEQ" >"$out/repo.txt" 2>&1 ||
  { echo "repo.py failed:"; cat "$out/repo.txt"; }
cat "$out/repo.txt"

# --- the server, one model at a time
SRV="" GRPC="" HTTP=""
stop() { if [ -n "$SRV" ]; then kill -TERM "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; SRV=""; fi; }
trap stop EXIT
# serve MODEL: a fresh server on its repository; GRPC and HTTP once it says ready (every model loaded)
serve() {
  local m=$1 log=$out/$1_server.log t0 lim ports=""
  t0=$SECONDS
  # shellcheck disable=SC2086  # INFERD_ARGS: separate flags
  "${pin_srv[@]}" "$b/bin/inferd" --model-repository "$repo/$m" --grpc-port 0 --http-port 0 --allow-client-shm true \
    --exit-timeout-secs 5 --log-level info ${INFERD_ARGS:-} 2>"$log" &
  SRV=$!
  lim=$(cap "$READY_S")
  while [ $((SECONDS - t0)) -lt "$lim" ]; do
    ports=$(grep -m1 -oE 'inferd ready: grpc=[0-9]+ http=[0-9]+' "$log" || true)
    [ -n "$ports" ] && break
    kill -0 "$SRV" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$ports" ]; then
    step "$m: the server never said ready (log tail below)"
    tail -n 15 "$log"
    kill -KILL "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; SRV=""
    return 1
  fi
  GRPC=$(echo "$ports" | sed -E 's/.*grpc=([0-9]+).*/\1/')
  HTTP=$(echo "$ports" | sed -E 's/.*http=([0-9]+).*/\1/')
  echo "$((SECONDS - t0))" >"$out/$m.ready_s"
  step "$m: ready $((SECONDS - t0)) s after start (grpc $GRPC, http $HTTP)"
  grep -E "prepared in|is ready|budget" "$log" | head -n 6
}
# metrics MODEL FILE: the model's lazy-prepare, padding and preparation lines from /metrics
metrics() {
  "$PYTHON" - "http://127.0.0.1:$HTTP/metrics" "$1" >"$2" 2>&1 <<'PY'
import sys, urllib.request
try:
    text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
except Exception as e:
    sys.exit("/metrics: %s" % e)
names = ("inferd_lazy_prepares_total", "inferd_lazy_prepare_causes_total", "inferd_padded_batches_total",
         "inferd_padded_rows_total", "inferd_instance_prepared_batch_sizes", "inferd_instance_prepare_seconds",
         "inferd_instance_lazy_prepares_total")
for l in text.splitlines():
    if l.split("{")[0] in names and 'model="%s"' % sys.argv[2] in l:
        print(l)
PY
}
data_args() { [ "$1" = bert_base ] && echo "--input-data $repo/bert_base_data"; }
out_bytes() { cat "$repo/$1.out_bytes" 2>/dev/null || echo 102400; }
# load TAG MODEL SECS none|system|cuda [REPORT]: inferd-load, CONC one-row requests in flight over CONNS connections
load() {
  local tag=$1 m=$2 secs=$3 shm=$4 t args
  t=$(cap $((secs + 30)))
  if [ "$t" -le $((secs / 2 + 2)) ]; then step "$tag: skipped (deadline)"; return; fi
  args=(-u "127.0.0.1:$GRPC" -m "$m" --concurrency-range "$CONC:$CONC:1" -b 1 --connections "$CONNS"
    --threads "$THREADS" --duration-s "$secs" --server-stats --json "$out/$tag.json")
  [ "$shm" != none ] && args+=(--shared-memory "$shm" --output-shared-memory-size "$(out_bytes "$m")")
  [ -n "${5:-}" ] && args+=(--report-every-s 1)
  # shellcheck disable=SC2046  # data_args: separate words
  timeout -k 5 "$t" "${pin_load[@]}" "$b/bin/inferd-load" "${args[@]}" $(data_args "$m") >"$out/$tag.txt" 2>&1
  local rc=$?
  echo "$rc" >"$out/$tag.rc"
  step "$tag: inferd-load exit $rc: $(grep -E '^conc' "$out/$tag.txt" | tail -n 1)"
  [ "$rc" = 0 ] || tail -n 5 "$out/$tag.txt"
}
# pa TAG MODEL none|system|cuda: perf_analyzer at CONC over gRPC, one window of a counted number of requests
# (its time windows never end above ~50k infer/s: tests/gpu/perf_analyzer_gpu.sh), sized from inferd-load's rate
pa() {
  local tag=$1 m=$2 shm=$3 rate n t args
  [ -z "$PA" ] && { echo "no perf_analyzer" >"$out/$tag.skipped"; return; }
  rate=$("$PYTHON" -c 'import json,sys; print(int(json.load(open(sys.argv[1]))[0]["throughput_rps"]))' \
    "$out/$2_grpc.json" 2>/dev/null || echo 1000)
  n=$("$PYTHON" -c 'import sys; print(max(500, int(float(sys.argv[1]) * float(sys.argv[2]) * float(sys.argv[3]))))' \
    "$rate" "$PA_S" "$PA_FRAC")
  t=$(cap "$PA_TIMEOUT")
  [ $((t + RESERVE)) -gt $(($(left) - 15)) ] && t=$(($(left) - 15 - RESERVE))
  if [ "$t" -lt 10 ]; then step "$tag: skipped (deadline)"; echo deadline >"$out/$tag.skipped"; return; fi
  args=(-m "$m" -u "127.0.0.1:$GRPC" -i grpc --concurrency-range "$CONC:$CONC" --request-count "$n" -f "$out/$tag.csv")
  [ "$shm" != none ] && args+=(--shared-memory "$shm" --output-shared-memory-size "$(out_bytes "$m")")
  # shellcheck disable=SC2046,SC2086  # data_args, PA_ARGS: separate words
  LD_LIBRARY_PATH=$PA_LD timeout -k 5 "$t" "${pin_load[@]}" "$PA" "${args[@]}" $(data_args "$m") ${PA_ARGS:-} >"$out/$tag.txt" 2>&1 &
  local pid=$! most=0 k
  while kill -0 $pid 2>/dev/null; do  # the most connections to the server it held at once
    k=$(est_conns "$GRPC")
    [ "$k" -gt "$most" ] && most=$k
    sleep 0.5
  done
  wait $pid
  local rc=$?
  echo "$most" >"$out/$tag.conns"
  echo "$rc" >"$out/$tag.rc"
  step "$tag: perf_analyzer ($n requests) exit $rc: $(grep -E 'Throughput' "$out/$tag.txt" | head -n 1), $most connections"
  [ "$rc" = 0 ] || tail -n 5 "$out/$tag.txt"
}

# RESERVE: seconds perf_analyzer leaves to the models after this one (their inferd-load points come first)
RESERVE=0 last=${MODELS##* }
for m in $MODELS; do
  if [ "$m" = "$last" ]; then RESERVE=0; else RESERVE=${PA_RESERVE:-110}; fi
  [ -f "$repo/$m/$m/config.pbtxt" ] || { step "$m: no repository (offline.py or repo.py failed)"; continue; }
  [ "$(left)" -gt 40 ] || { step "$m: skipped (deadline)"; continue; }
  serve "$m" || continue
  if [ "$m" = resnet50 ]; then
    load resnet50_cold resnet50 "$COLD_S" none report  # from the moment it said ready
    metrics resnet50 "$out/resnet50_metrics_cold.txt"
    cat "$out/resnet50_metrics_cold.txt"
  fi
  load "${m}_grpc" "$m" "$SECS" none
  load "${m}_shm" "$m" "$SECS" system
  [ $kind = gpu ] && load "${m}_cudashm" "$m" "$SECS" cuda
  pa "${m}_pa_grpc" "$m" none
  pa "${m}_pa_shm" "$m" system
  [ $kind = gpu ] && pa "${m}_pa_cuda" "$m" cuda
  metrics "$m" "$out/${m}_metrics_end.txt"
  stop
done

# --- coldstart/run.sh's own setting (one instance, max_batch 256, the default budget) when time is left
if [ "${COLDSTART:-$d_cs}" = 1 ] && [ -f "$models/resnet50.onnx" ] && [ "$(left)" -gt $((COLD_S + 75)) ]; then
  step "coldstart/run.sh (1 instance, max_batch 256, budget 60, $COLD_S s)"
  OUT=$out/coldstart MODEL_DIR=$models DURATION=$COLD_S BUDGETS=60 INSTANCES=1 MBS=${COLD_MBS:-256} PREC=$d_prec \
    timeout -k 5 "$(cap 200)" bash "$root/tests/bench/coldstart/run.sh" "$b" >"$out/coldstart.txt" 2>&1
  step "coldstart/run.sh: exit $?"
  grep -E "ready .* after start|ratio|lazy_prepare" "$out/coldstart.txt"
fi

step "table"
"$PYTHON" "$here/table.py" "$out" "$CONC" | tee "$out/table.md"
step "done"
