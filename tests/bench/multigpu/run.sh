#!/usr/bin/env bash
# Issue 16 in one call on a two-GPU machine: does inferd scale across GPUs?
#   part "one process": one inferd whose instance_group puts COUNT instances on GPU 0 (gpus [0]) and then
#     COUNT on each of GPUs 0 and 1 (gpus [0, 1]); the same load generator (clients/load's inferd-load,
#     closed loop) at each stream count; throughput, p50/p99, each GPU's busy fraction
#     (inferd_gpu_busy_seconds_total over the level), the client's answers against the server's count.
#   part "per GPU + nginx": deploy/mig/inferd-mig.sh starts one server per GPU (CUDA_VISIBLE_DEVICES, as on
#     a MIG host one per slice), deploy/lb/render.sh renders the nginx balancer in front; one server behind
#     nginx, then both; every server's own success count against what the load generator counted.
# Writes OUT/results.jsonl, OUT/table.md (tests/bench/multigpu/table.py), the logs, OUT/machine.txt (GPUs,
# their link, NUMA nodes, MIG mode).
#
#   tests/bench/multigpu/run.sh BUNDLE OUT     (from the repository root; BUNDLE from bundle.sh beside this)
#
# Env: MODELS (default "resnet50:fp32:500:64:warm mlp4096:fp32:500:1024": MODEL:PRECISION:DELAY_US:MAX_BATCH[:warm],
#      repo.py),
#      STREAMS_resnet50 ("64 256"), STREAMS_mlp4096 ("256 1024"), LB_MODELS (models of the nginx part,
#      default resnet50), COUNT (instances per GPU, 2), SERVER_CORES (0-15), NGINX_CORES (16-23),
#      LOAD_CORES (24-31), LOAD_THREADS (8), INTERVAL_MS (2000), TRIALS (6), WARM_S (warm-up level, 6),
#      NGINX (default: nginx in BUNDLE/bin, else on PATH), PYTHON (numpy + onnx), KIND=cpu (a smoke run
#      of the scripts without a GPU: every instance on the CPU, one "GPU" setup per part), REPOS (where the
#      models are written, default OUT/repos).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../script_args.sh"
script_args "$@"
B=$IN_DIR OUT=$OUT_DIR
ROOT=$(cd "$HERE/../../.." && pwd)
MODELS=${MODELS:-"resnet50:fp32:500:64:warm mlp4096:fp32:500:1024"}
LB_MODELS=${LB_MODELS:-resnet50}
COUNT=${COUNT:-2}
SERVER_CORES=${SERVER_CORES:-0-15}
NGINX_CORES=${NGINX_CORES:-16-23}
LOAD_CORES=${LOAD_CORES:-24-31}
LOAD_THREADS=${LOAD_THREADS:-8}
INTERVAL_MS=${INTERVAL_MS:-2000}
TRIALS=${TRIALS:-6}
WARM_S=${WARM_S:-6}
KIND=${KIND:-gpu}
REPOS=${REPOS:-$OUT/repos}  # the models: hundreds of MB (not under OUT on the device, where OUT travels back)
script_python
NGINX=${NGINX:-$B/bin/nginx}
[ -x "$NGINX" ] || NGINX=$(command -v nginx || true)
RES=$OUT/results.jsonl
: >"$RES"
for t in "$B/lib.tar.xz"; do [ -f "$t" ] && [ ! -d "$B/lib" ] && tar -C "$B" -xJf "$t"; done
cudnn=$(dirname "$(find /opt/torch /usr/local/lib /usr/lib -name 'libcudnn.so.9' 2>/dev/null | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH=$B/lib:${cudnn:+$cudnn:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}

{
  echo "date: $(date -u '+%F %T UTC'); $(nproc) CPUs; server cores $SERVER_CORES, nginx $NGINX_CORES, load $LOAD_CORES"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L
    nvidia-smi --query-gpu=index,name,driver_version,mig.mode.current,mig.mode.pending,pci.bus_id --format=csv
    nvidia-smi topo -m
  fi
  lscpu | grep -E 'NUMA|Model name'
  "$ROOT/deploy/mig/inferd-mig.sh" --repo /tmp --bin "$B/bin/inferd" --dry-run 2>&1 | sed 's/^/inferd-mig.sh --dry-run: /'
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt" >&2

PIDS=()
stop_all() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  PIDS=()
}
trap stop_all EXIT

ready() {  # HTTP_PORT PID LOG: /v2/health/ready answers 200 (up to 10 minutes: graphs, cuDNN plans)
  for _ in $(seq 1 3000); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/v2/health/ready")" = 200 ] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    grep -q 'a model failed to load' "$3" 2>/dev/null && return 1
    sleep 0.2
  done
  return 1
}

# level PART MODEL SETUP SETUP_N STREAMS GRPC_PORT HTTP_PORT...: a warm-up level (not recorded), then the
# measured one; /metrics of every server around the measured one
level() {
  local part=$1 model=$2 setup=$3 n=$4 streams=$5 port=$6
  shift 6
  local tag=${part// /_}_${model}_${setup// /_}_$streams
  taskset -c "$LOAD_CORES" "$B/bin/inferd-load" -u "127.0.0.1:$port" -m "$model" --threads "$LOAD_THREADS" \
    --concurrency-range "$streams:$streams:1" -p $((WARM_S * 1000)) -r 1 >/dev/null 2>"$OUT/$tag.warm.log"
  local h
  for h in "$@"; do curl -s "http://127.0.0.1:$h/metrics" >"$OUT/m_before_$h"; done
  local t0 t1
  t0=$(date +%s.%N)
  taskset -c "$LOAD_CORES" "$B/bin/inferd-load" -u "127.0.0.1:$port" -m "$model" --threads "$LOAD_THREADS" \
    --concurrency-range "$streams:$streams:1" -p "$INTERVAL_MS" -r "$TRIALS" --json "$OUT/$tag.json" \
    >"$OUT/$tag.txt" 2>"$OUT/$tag.log"
  t1=$(date +%s.%N)
  local servers="" d
  for h in "$@"; do
    curl -s "http://127.0.0.1:$h/metrics" >"$OUT/m_after_$h"
    d=$("$PYTHON" "$HERE/table.py" delta "$OUT/m_before_$h" "$OUT/m_after_$h" "$(awk "BEGIN{print $t1 - $t0}")")
    servers="$servers${servers:+, }$d"
  done
  local ld
  ld=$("$PYTHON" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))[0]))' "$OUT/$tag.json" 2>/dev/null ||
       echo '{"throughput_rps": 0, "p50_us": 0, "p99_us": 0, "level_ok": 0, "level_errors": -1}')
  echo "{\"part\": \"$part\", \"model\": \"$model\", \"setup\": \"$setup\", \"setup_n\": $n, \"streams\": $streams, \"servers\": [$servers], \"load\": $ld}" |
    tee -a "$RES" | "$PYTHON" -c 'import json,sys; r=json.loads(sys.stdin.read()); l=r["load"]; print("%s | %s | %s | %d streams: %.0f req/s p50 %.0f p99 %.0f us, ok %d, errors %d, servers %s" % (r["part"], r["model"], r["setup"], r["streams"], l["throughput_rps"], l["p50_us"], l["p99_us"], l.get("level_ok", 0), l.get("level_errors", 0), [(s["success"], s["busy"]) for s in r["servers"]]))' >&2
}

streams_of() { local v="STREAMS_$1"; echo "${!v:-$([ "$1" = mlp4096 ] && echo "256 1024" || echo "64 256")}"; }

# --- part 1: one process, one GPU then two
for spec in $MODELS; do
  model=${spec%%:*}
  if [ "$KIND" = cpu ]; then variants="cpu:$COUNT"; else variants="gpus=0:$COUNT gpus=0,1:$COUNT"; fi
  # shellcheck disable=SC2086
  repos=$("$PYTHON" "$HERE/repo.py" "$REPOS" "$spec" $variants any:$COUNT) || exit 1
  n=0
  for r in $(echo "$repos" | head -n -1); do
    n=$((n + 1))
    setup="$n GPU"; [ $n -gt 1 ] && setup="$n GPUs"
    [ "$KIND" = cpu ] && setup="cpu x$COUNT"
    log=$OUT/inferd_${model}_$n.log
    taskset -c "$SERVER_CORES" "$B/bin/inferd" --model-repository "$r" --grpc-port 0 --http-port 0 \
      --exit-timeout-secs 10 >/dev/null 2>"$log" &
    PIDS=($!)
    grpc="" http=""
    for _ in $(seq 1 3000); do
      l=$(grep -m1 '^inferd ready: grpc=' "$log" 2>/dev/null) && break
      kill -0 "${PIDS[0]}" 2>/dev/null || break
      sleep 0.2
    done
    grpc=$(sed -n 's/^inferd ready: grpc=\([0-9]*\).*/\1/p' "$log" | head -1)
    http=$(sed -n 's/^inferd ready: .*http=\([0-9]*\).*/\1/p' "$log" | head -1)
    if [ -z "$grpc" ] || ! ready "$http" "${PIDS[0]}" "$log"; then
      echo "inferd ($model, $setup) did not start:" >&2; tail -n 20 "$log" >&2; stop_all; continue
    fi
    for s in $(streams_of "$model"); do level "one process" "$model" "$setup" $n "$s" "$grpc" "$http"; done
    stop_all
  done
done

# --- part 2: one server per GPU (inferd-mig.sh), nginx in front with one of them, then both
if [ -z "$NGINX" ]; then
  echo "no nginx: the balancer part is skipped" >&2
else
  for spec in $MODELS; do
    model=${spec%%:*}
    case " $LB_MODELS " in *" $model "*) ;; *) continue ;; esac
    [ "$KIND" = cpu ] && any=cpu:$COUNT || any=any:$COUNT
    repo=$("$PYTHON" "$HERE/repo.py" "$REPOS" "$spec" "$any") || exit 1
    mig_args=(--repo "$repo" --bin "$B/bin/inferd" --base-grpc-port 9101 --base-http-port 9100
              --upstreams-out "$OUT/upstreams_$model.txt" --log-dir "$OUT/mig_logs_$model")
    [ "$KIND" = cpu ] && printf 'GPU 0: cpu smoke (UUID: GPU-0)\nGPU 1: cpu smoke (UUID: GPU-1)\n' >"$OUT/smi.txt" &&
      mig_args+=(--smi-output "$OUT/smi.txt")
    taskset -c "$SERVER_CORES" "$ROOT/deploy/mig/inferd-mig.sh" "${mig_args[@]}" -- --exit-timeout-secs 10 \
      2>"$OUT/inferd-mig_$model.log" &
    PIDS=($!)
    for _ in $(seq 1 100); do [ -s "$OUT/upstreams_$model.txt" ] && break; sleep 0.1; done
    mapfile -t ups < <(grep -v '^#' "$OUT/upstreams_$model.txt")
    https=()
    ok=1
    for u in "${ups[@]}"; do
      h=${u##*:}
      https+=("$h")
      ready "$h" "${PIDS[0]}" "$OUT/mig_logs_$model/inferd-$(( ${#https[@]} - 1 )).log" || { echo "per-GPU server on http $h not ready" >&2; ok=0; }
    done
    if [ $ok = 1 ]; then
      for n in 1 2; do
        [ ${#ups[@]} -ge $n ] || break
        lb=$OUT/lb_${model}_$n
        mkdir -p "$lb"
        printf '%s\n' "${ups[@]:0:$n}" >"$lb/upstreams.txt"
        sh "$ROOT/deploy/lb/render.sh" --upstreams "$lb/upstreams.txt" --listen-grpc 8801 --listen-http 8800 \
          --listen-addr 127.0.0.1 --run-dir "$lb" --out "$lb/nginx.conf" || break
        taskset -c "$NGINX_CORES" "$NGINX" -p "$lb" -e "$lb/error.log" -c "$lb/nginx.conf" -g 'daemon off;' \
          >"$lb/nginx.stderr" 2>&1 &
        npid=$!
        for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/8801) 2>/dev/null && break; sleep 0.1; done
        setup="$n server"; [ $n -gt 1 ] && setup="$n servers"
        for s in $(streams_of "$model"); do level "per GPU + nginx" "$model" "$setup" $n "$s" 8801 "${https[@]}"; done
        kill -QUIT $npid 2>/dev/null; wait $npid 2>/dev/null
      done
    fi
    stop_all
  done
fi
"$PYTHON" "$HERE/table.py" report "$OUT" | tee "$OUT/table.md"
