#!/usr/bin/env bash
# perf_analyzer's yardstick, one GPU call (issue 32 items 3-4; README.md beside this file):
#   1. the seed MLP transport sweep (tests/bench/serve_gpu/transport.sh: the anchors' echo_server against inferd,
#      1, 64 and 512 streams; MLP_VARIANTS), first: it needs no export;
#   2. per model (ResNet-50 FP32 image in, BERT-base s128 INT64 ids and mask in / last_hidden_state out): the same
#      client flags and payload against bench_fixed_server (tests/bench/echo/fixed_server.c: a bare C-core server
#      that answers the model's metadata/config and every ModelInfer with one fixed reply of the model's output
#      size; none of inferd's work) and against inferd serving the model as run.sh does (repo.py: FP16, 2 GPU
#      instances, 2 ms delay); on each, inferd-load (CONNS connections) then perf_analyzer (sync, and --async),
#      CONC in flight over gRPC, with the connections perf_analyzer held;
#   3. one markdown table (pa_echo.py) to stdout and $OUT/pa_echo.md.
# Every step runs under `timeout`, cut to fit DEADLINE_S, so the table prints even when a step hangs.
#
#   bash tests/bench/issue32/pa_echo.sh BUNDLE       (BUNDLE: bundle.sh's folder, e.g. .devrun-i32, with
#                                                      bin/bench_fixed_server and anchors/)
#
# Env: OUT (/tmp/pa_echo), KIND (KIND_GPU; KIND_CPU: the dry run on stand-in models), CONC (256), CONNS (8),
#   THREADS (8), SECS (inferd-load seconds, 6), PA_S / PA_FRAC (perf_analyzer's counted window: PA_S s at PA_FRAC of
#   inferd-load's rate on the same server: 6, 0.5), PA_TIMEOUT (40), FIXED_THREADS (the yardstick's CQ threads, 8),
#   PA_ASYNC (1: also perf_analyzer --async, one client per worker thread, ~3 connections), MODELS ("" skips part 2; "resnet50
#   bert_base"), MLP_VARIANTS ("gpu:fp16:-:2 gpu:fp16:100:2"; "" skips part 1), MLP_SECS (3),
#   DEADLINE_S (330), PA_ARGS (more perf_analyzer flags), PYTHON, SRV_CPUS / LOAD_CPUS (0-7 / 8-15 on 16+ cores).
set -u
T0=$SECONDS
b=$(cd "${1:?usage: pa_echo.sh BUNDLE}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bench/issue32/conns.sh
. "$here/conns.sh"
root=$(cd "$here/../../.." && pwd)
out=${OUT:-/tmp/pa_echo}
KIND=${KIND:-KIND_GPU}
case $KIND in KIND_GPU) kind=gpu ;; KIND_CPU) kind=cpu ;; *) echo "KIND is KIND_GPU or KIND_CPU" >&2; exit 2 ;; esac
CONC=${CONC:-256} CONNS=${CONNS:-8} THREADS=${THREADS:-8} SECS=${SECS:-6} PA_S=${PA_S:-6} PA_FRAC=${PA_FRAC:-0.5}
PA_TIMEOUT=${PA_TIMEOUT:-40} FIXED_THREADS=${FIXED_THREADS:-8} MODELS=${MODELS-resnet50 bert_base}
MLP_VARIANTS=${MLP_VARIANTS-gpu:fp16:-:2 gpu:fp16:100:2} MLP_SECS=${MLP_SECS:-3} DEADLINE_S=${DEADLINE_S:-330}
PA_ASYNC=${PA_ASYNC:-1}
if [ -z "${PYTHON:-}" ]; then
  if [ -x /opt/torch/.venv/bin/python ]; then PYTHON=/opt/torch/.venv/bin/python
  elif [ -x "$root/.venv/bin/python" ]; then PYTHON=$root/.venv/bin/python
  else PYTHON=python3; fi
fi
export PYTHONUNBUFFERED=1
rm -rf "$out"
mkdir -p "$out"
models=/tmp/pa_echo_models repo=/tmp/pa_echo_repo

# --- the bundle (as run.sh unpacks it)
if [ -f "$b/bundle.tar.xz" ] && [ ! -x "$b/bin/inferd" ]; then tar -C "$b" -xJf "$b/bundle.tar.xz"; fi
cudnn=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
[ -e "$cudnn/libcudnn.so.9" ] || cudnn=$(dirname "$(find /opt /usr -name libcudnn.so.9 2>/dev/null | head -n 1)")
export LD_LIBRARY_PATH=$b/lib:$cudnn:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
PA_LD=$LD_LIBRARY_PATH PA=""
if [ -f "$b/pa.tar.xz" ]; then
  if [ ! -x "$b/pa/bin/perf_analyzer" ]; then mkdir -p "$b/pa" && tar -C "$b/pa" -xJf "$b/pa.tar.xz"; fi
  PA=$b/pa/bin/perf_analyzer PA_LD=$b/pa/lib:$LD_LIBRARY_PATH
fi
[ -z "$PA" ] && PA=$(command -v perf_analyzer || true)
[ -z "$PA" ] && [ -x "$root/.venv/bin/perf_analyzer" ] && PA=$root/.venv/bin/perf_analyzer
for f in inferd inferd-load bench_fixed_server; do [ -x "$b/bin/$f" ] || echo "no $b/bin/$f: its rows are left out" >&2; done
pin_srv=() pin_load=()
if [ "$(nproc)" -ge 16 ]; then pin_srv=(taskset -c "${SRV_CPUS:-0-7}") pin_load=(taskset -c "${LOAD_CPUS:-8-15}"); fi
left() { echo $((DEADLINE_S - (SECONDS - T0))); }
cap() { local l; l=$(($(left) - 10)); [ "$l" -lt 1 ] && l=1; echo $(($1 < l ? $1 : l)); }
step() { echo "[$(printf '%4d' $((SECONDS - T0))) s] $*"; }
{
  echo "date: $(date -u '+%F %T UTC'); $(nproc) CPUs; kind $KIND; commit $(cat "$b/commit.txt" 2>/dev/null || echo '?')"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "settings: CONC=$CONC CONNS=$CONNS THREADS=$THREADS SECS=$SECS PA_S=$PA_S PA_FRAC=$PA_FRAC" \
    "FIXED_THREADS=$FIXED_THREADS; server cores ${pin_srv[*]:-any}, load cores ${pin_load[*]:-any}; PA_ARGS=${PA_ARGS:-}"
} | tee "$out/machine.txt"

# --- the seed MLP against the anchors' echo (transport.sh; loadc and echo_server from the bundle)
if [ -n "$MLP_VARIANTS" ] && [ -x "$b/anchors/loadc" ] && [ "$(left)" -gt 45 ]; then
  step "transport.sh: $MLP_VARIANTS, ${MLP_SECS} s per point"
  ANCHORS_BIN=$b/anchors KSERVE_DESC=$b/anchors/kserve_min.desc PYTHON=$PYTHON VARIANTS=$MLP_VARIANTS SECS=$MLP_SECS \
    SRV_CORES=${SRV_CPUS:-0-7} LOAD_CORES=${LOAD_CPUS:-8-15} \
    timeout -k 5 "$(cap 110)" bash "$root/tests/bench/serve_gpu/transport.sh" "$b/bin" "$out/mlp" >"$out/mlp.txt" 2>&1
  step "transport.sh: exit $?"
elif [ -n "$MLP_VARIANTS" ]; then
  step "transport.sh: skipped ($([ -x "$b/anchors/loadc" ] && echo deadline || echo "no $b/anchors/loadc"))"
fi

# --- the models (exported only: PyTorch's timing is run.sh's) and their repositories
if [ -n "$MODELS" ]; then
  step "offline.py: export"
  rm -rf "$models" "$repo"
  timeout -k 5 "$(cap 150)" "$PYTHON" "$here/offline.py" --out "$models" --kind $kind --time "" \
    >"$out/offline.jsonl" 2>"$out/offline.log" || { step "offline.py failed"; tail -n 5 "$out/offline.log"; }
  "$PYTHON" "$here/repo.py" "$models" "$repo" --kind $kind >"$out/repo.txt" 2>&1 || cat "$out/repo.txt"
fi

PID=""
stop() { if [ -n "$PID" ]; then kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=""; fi; }
trap stop EXIT
# wait_ready LOG REGEX: the port once LOG has REGEX's line (group: grpc=N), or "" after READY s
wait_ready() {
  local t0=$SECONDS lim l
  lim=$(cap "${3:-150}")
  while [ $((SECONDS - t0)) -lt "$lim" ]; do
    l=$(grep -m1 -oE "$2 grpc=[0-9]+" "$1" 2>/dev/null || true)
    [ -n "$l" ] && { echo "${l##*=}"; return; }
    kill -0 "$PID" 2>/dev/null || return
    sleep 0.1
  done
}
data_args() { [ "$1" = bert_base ] && echo "--input-data $repo/bert_base_data"; }
# load TAG MODEL PORT: inferd-load, CONC one-row requests over CONNS connections, SECS s
load() {
  local t
  t=$(cap $((SECS + 20)))
  [ "$t" -le $((SECS + 2)) ] && { step "$1: skipped (deadline)"; return; }
  # shellcheck disable=SC2046
  timeout -k 5 "$t" "${pin_load[@]}" "$b/bin/inferd-load" -u "127.0.0.1:$3" -m "$2" --concurrency-range "$CONC:$CONC:1" \
    -b 1 --connections "$CONNS" --threads "$THREADS" --duration-s "$SECS" --json "$out/$1.json" $(data_args "$2") \
    >"$out/$1.txt" 2>&1
  echo $? >"$out/$1.rc"
  step "$1: inferd-load exit $(cat "$out/$1.rc"): $(grep -E '^conc' "$out/$1.txt" | tail -n 1)"
}
# pa TAG MODEL PORT RATE_TAG [FLAGS]: perf_analyzer at CONC over gRPC, one window of a counted number of requests
pa() {
  local n t pid most=0 k
  [ -z "$PA" ] && { echo "no perf_analyzer" >"$out/$1.skipped"; return; }
  n=$("$PYTHON" -c 'import json,sys
try: r = json.load(open(sys.argv[1]))[0]["throughput_rps"]
except Exception: r = 1000
print(max(500, int(r * float(sys.argv[2]) * float(sys.argv[3]))))' "$out/$4.json" "$PA_S" "$PA_FRAC")
  t=$(cap "$PA_TIMEOUT")
  [ "$t" -lt 10 ] && { step "$1: skipped (deadline)"; echo deadline >"$out/$1.skipped"; return; }
  # shellcheck disable=SC2046,SC2086
  LD_LIBRARY_PATH=$PA_LD timeout -k 5 "$t" "${pin_load[@]}" "$PA" -m "$2" -u "127.0.0.1:$3" -i grpc \
    --concurrency-range "$CONC:$CONC" --request-count "$n" -f "$out/$1.csv" $(data_args "$2") ${PA_ARGS:-} ${5:-} \
    >"$out/$1.txt" 2>&1 &
  pid=$!
  while kill -0 $pid 2>/dev/null; do  # the most connections it held at once
    k=$(est_conns "$3")
    [ "$k" -gt "$most" ] && most=$k
    sleep 0.5
  done
  wait $pid
  echo $? >"$out/$1.rc"
  echo "$most" >"$out/$1.conns"
  step "$1: perf_analyzer ($n requests) exit $(cat "$out/$1.rc"): $(grep -m1 Throughput "$out/$1.txt"), $most connections"
}

for m in $MODELS; do
  cfg=$repo/$m/$m/config.pbtxt
  [ -f "$cfg" ] || { step "$m: no repository"; continue; }
  [ "$(left)" -gt 40 ] || { step "$m: skipped (deadline)"; continue; }
  # the yardstick, describing the model as its config does
  read -r -a fargs <<<"$("$PYTHON" "$here/pa_echo.py" args "$cfg")"
  "${pin_srv[@]}" "$b/bin/bench_fixed_server" "${fargs[@]}" --port 0 --threads "$FIXED_THREADS" 2>"$out/${m}_fixed.log" &
  PID=$!
  port=$(wait_ready "$out/${m}_fixed.log" "fixed ready:" 20)
  if [ -n "$port" ]; then
    step "$m: bench_fixed_server ${fargs[*]} on $port"
    load "${m}_fixed_load" "$m" "$port"
    pa "${m}_fixed_pa" "$m" "$port" "${m}_fixed_load"
    [ "$PA_ASYNC" = 1 ] && pa "${m}_fixed_paa" "$m" "$port" "${m}_fixed_load" --async
  else
    step "$m: bench_fixed_server did not start: $(tail -n 2 "$out/${m}_fixed.log")"
  fi
  stop
  # inferd, the same model as run.sh serves it
  "${pin_srv[@]}" "$b/bin/inferd" --model-repository "$repo/$m" --grpc-port 0 --http-port 0 --exit-timeout-secs 5 \
    2>"$out/${m}_inferd.log" &
  PID=$!
  port=$(wait_ready "$out/${m}_inferd.log" "inferd ready:" 150)
  if [ -n "$port" ]; then
    step "$m: inferd ready on $port"
    load "${m}_inferd_load" "$m" "$port"
    pa "${m}_inferd_pa" "$m" "$port" "${m}_inferd_load"
    [ "$PA_ASYNC" = 1 ] && pa "${m}_inferd_paa" "$m" "$port" "${m}_inferd_load" --async
  else
    step "$m: inferd did not say ready: $(tail -n 3 "$out/${m}_inferd.log")"
  fi
  stop
done

step "table"
"$PYTHON" "$here/pa_echo.py" table "$out" | tee "$out/pa_echo.md"
