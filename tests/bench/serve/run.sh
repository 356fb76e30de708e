#!/usr/bin/env bash
# Side-by-side server benchmarks of issue 6, one script, one run, on the GPU
# machine (see tests/bench/RESULTS.md for what each goal means):
#   1. transport ceiling: bench_echo_server vs inferd's identity model, 1-row requests, concurrency sweep
#   2. dynamic batching on vs off (fp16 on the GPU), the seed MLP and the 4x4096 MLP, 512 streams
#   3. inferd vs the Python grpcio + PyTorch dynamic-batching peer (tests/bench/peers), 512 streams
#   4. server overhead at concurrency 1 (request duration minus compute, p50, from /dashboard.json)
#   5. GPU busy fraction, 4x4096 fp32, saturating load from inferd-load (tensors in the messages, then in
#      system shared memory)
# usage: run.sh BIN_DIR OUT_DIR   (BIN_DIR holds inferd, inferd-load, bench_echo_server)
# env: PYTHON, LEVELS (sweep, default "1 16 64 256 512"), INTERVAL_MS (default 1000), KIND (default KIND_GPU),
#      BIG=0 skips the 4x4096 parts, PEER_ARGS (default "--fp16 --backend torch --device cuda"), STREAMS (default 512)
set -u
BIN=$(cd "$1" && pwd)
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PY=${PYTHON:-python3}
LEVELS=${LEVELS:-"1 16 64 256 512"}
IV=${INTERVAL_MS:-1000}
STREAMS=${STREAMS:-512}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOAD="$BIN/inferd-load"
LOADARGS=(--measurement-interval "$IV" --max-trials 6 --stability-percentage 15)
: >"$OUT/failures.txt"

"$PY" "$HERE/gen_repo.py" "$OUT/models/repo" --kind "${KIND:-KIND_GPU}" || exit 1

SRV_PID="" GRPC="" HTTP=""
# start NAME READY_REGEX CMD...: runs CMD, waits for its "ready: grpc=P [http=Q]" line
start() {
  local name=$1 re=$2
  shift 2
  "$@" >"$OUT/$name.stdout" 2>"$OUT/$name.log" &
  SRV_PID=$!
  GRPC="" HTTP=""
  for _ in $(seq 1 1500); do
    local line
    line=$(grep -m1 -E "$re" "$OUT/$name.log" 2>/dev/null || true)
    if [ -n "$line" ]; then
      GRPC=$(sed -n 's/.*grpc=\([0-9]*\).*/\1/p' <<<"$line")
      HTTP=$(sed -n 's/.*http=\([0-9]*\).*/\1/p' <<<"$line")
      return 0
    fi
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.2
  done
  echo "$name did not start: $(tail -n 5 "$OUT/$name.log" | tr '\n' ' ')" | tee -a "$OUT/failures.txt" >&2
  return 1
}
stop() {
  [ -n "$SRV_PID" ] && kill -TERM "$SRV_PID" 2>/dev/null && wait "$SRV_PID" 2>/dev/null
  SRV_PID=""
}
trap stop EXIT

# load TAG MODEL CONCURRENCY [extra args]: one closed-loop level, CSV and JSON under $OUT/load
load() {
  local tag=$1 model=$2 c=$3
  shift 3
  mkdir -p "$OUT/load"
  echo "== $tag: $model c=$c $*" >&2
  "$LOAD" -u "127.0.0.1:$GRPC" -m "$model" --concurrency-range "$c:$c:1" "${LOADARGS[@]}" \
    --csv "$OUT/load/$tag.c$c.csv" --json "$OUT/load/$tag.c$c.json" "$@" >>"$OUT/load/$tag.txt" 2>>"$OUT/load/$tag.err" ||
    echo "inferd-load $tag c=$c failed: $(tail -n 2 "$OUT/load/$tag.err" | tr '\n' ' ')" | tee -a "$OUT/failures.txt" >&2
}
metrics() {
  date +%s.%N >"$OUT/$1.time"
  curl -s "http://127.0.0.1:$HTTP/metrics" >"$OUT/$1.metrics" || true
}
dash() { curl -s "http://127.0.0.1:$HTTP/dashboard.json" >"$OUT/$1.dashboard.json" || true; }

# 1. transport ceiling
if start echo "echo ready: grpc=" "$BIN/bench_echo_server" --port 0 --threads 8 --datatype FP32 --shape -1,16; then
  # the echo server reports max_batch_size 0 and shape [-1,16]: one row, stated as the shape
  for c in $LEVELS; do load echo identity "$c" --shape INPUT0:1,16 --validate-identity; done
  stop
fi
if start inferd "inferd ready: grpc=" "$BIN/inferd" --model-repository "$OUT/models/repo" --grpc-port 0 --http-port 0 \
    --disable-auto-complete-config --allow-client-shm true; then  # the _nob configs must stay without dynamic batching
  for c in $LEVELS; do load inferd_identity identity "$c" --rows 1 --validate-identity; done
  # 4. overhead at concurrency 1, on the model without a queue delay (a lone request would otherwise
  #    wait max_queue_delay by design); its histograms hold only this run's traffic
  load overhead_c1 mlp_nob 1 --server-stats
  dash overhead_c1
  # 2. dynamic batching on vs off at 512 streams
  models="mlp_b mlp_nob"
  [ "${BIG:-1}" = 1 ] && models="$models mlp4096_b mlp4096_nob"
  for m in $models; do load batching_$m "$m" "$STREAMS" --server-stats; done
  # 3. inferd's side of the peer comparison (same model as the peer, fp16, batching on)
  load peer_inferd mlp_b "$STREAMS" --server-stats
  # 5. GPU busy under saturation: 4x4096 fp32, four instances, 64 rows per request
  if [ "${BIG:-1}" = 1 ]; then
    metrics busy0
    load busy mlp4096_fp32 256 --rows 64 --server-stats
    metrics busy1
    # 5b. the same load with the tensors in system shared memory: what is left once gRPC stops moving
    #     1 MiB messages (a client on the server's host, as Triton users run it)
    metrics busy_shm0
    load busy_shm mlp4096_fp32 256 --rows 64 --server-stats --shared-memory system \
      --output-shared-memory-size $((64 * 4096 * 4))
    metrics busy_shm1
  fi
  stop
fi
# 3. the Python peer on the same weights
if start peer "peer ready: grpc=" "$PY" "$ROOT/tests/bench/peers/peer_server.py" --model "$OUT/models/mlp_1024_512_10.onnx" \
    --port 0 --max-batch 1024 --max-delay-us 500 ${PEER_ARGS:---fp16 --backend torch --device cuda}; then
  load peer_python mlp_1024_512_10 "$STREAMS"
  stop
fi
trap - EXIT

"$PY" "$HERE/report.py" "$OUT" | tee "$OUT/results.md"   # also merges each tag's levels into load/TAG.csv
"$PY" "$ROOT/clients/plot_load.py" "$OUT/load/echo.csv" "$OUT/load/inferd_identity.csv" --labels echo,inferd \
  --out "$OUT/plots" >>"$OUT/plots.log" 2>&1 || echo "plot_load.py failed (see plots.log)" | tee -a "$OUT/failures.txt"
