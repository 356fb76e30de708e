#!/usr/bin/env bash
# The latency target against Triton's fixed delay (issue 37), on the GPU machine: one server holds every
# configuration of each model (gen_repo.py: <model>_d<US> fixed delays, <model>_t<MS> targets); inferd-load
# drives each with 64 and 512 closed-loop streams; table.py prints, per model, streams and target, the target's
# throughput and p99 beside the best fixed delay whose p99 meets the same target, and their ratio (the bar:
# p99 met, throughput >= 0.9 of that best). Each target model runs a warm-up level first (the policy learns
# compute times from the batches it runs).
# usage: delays.sh BIN_DIR OUT_DIR   (BIN_DIR holds inferd and inferd-load)
# env: PYTHON, KIND (default KIND_GPU), COUNT (instances, default 2), STREAMS (default "64 512"),
#      DURATION_S (per level, default 10), DELAYS, TARGETS (gen_repo.py's lists), BIG=0 skips the 4x4096 MLP
set -u
BIN=$(cd "$1" && pwd)
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
STREAMS=${STREAMS:-"64 512"}
DUR=${DURATION_S:-10}
mkdir -p "$OUT/load"
OUT=$(cd "$OUT" && pwd)
: >"$OUT/failures.txt"
big=()
[ "${BIG:-1}" = 0 ] && big=(--no-big)
"$PY" "$HERE/gen_repo.py" "$OUT/models/repo" --kind "${KIND:-KIND_GPU}" --count "${COUNT:-2}" \
  --delays "${DELAYS:-0,100,250,500,1000,2000,4000,8000}" --targets "${TARGETS:-5,20,50}" "${big[@]}" || exit 1

"$BIN/inferd" --model-repository "$OUT/models/repo" --grpc-port 0 --http-port 0 >"$OUT/inferd.stdout" \
  2>"$OUT/inferd.log" &
SRV=$!
trap 'kill -TERM $SRV 2>/dev/null; wait $SRV 2>/dev/null' EXIT
GRPC="" HTTP=""
for _ in $(seq 1 3000); do
  line=$(grep -m1 "inferd ready: grpc=" "$OUT/inferd.log" 2>/dev/null || true)
  if [ -n "$line" ]; then
    GRPC=$(sed -n 's/.*grpc=\([0-9]*\).*/\1/p' <<<"$line")
    HTTP=$(sed -n 's/.*http=\([0-9]*\).*/\1/p' <<<"$line")
    break
  fi
  kill -0 $SRV 2>/dev/null || break
  sleep 0.2
done
[ -n "$GRPC" ] || { echo "inferd did not start: $(tail -n 5 "$OUT/inferd.log")" >&2; exit 1; }

shape() { case $1 in mlp4096*) echo INPUT0:4096 ;; *) echo INPUT0:1024 ;; esac; }
for dir in "$OUT"/models/repo/*/; do
  m=$(basename "$dir")
  for s in $STREAMS; do
    # a target model's first level teaches its policy; only the second is kept
    case $m in *_t*) "$BIN/inferd-load" -u "127.0.0.1:$GRPC" -m "$m" --concurrency-range "$s:$s:1" \
      --shape "$(shape "$m")" --duration-s 3 >/dev/null 2>&1 ;; esac
    echo "== $m streams=$s" >&2
    "$BIN/inferd-load" -u "127.0.0.1:$GRPC" -m "$m" --concurrency-range "$s:$s:1" --shape "$(shape "$m")" \
      --duration-s "$DUR" --server-stats --csv "$OUT/load/$m.s$s.csv" >>"$OUT/load/$m.txt" 2>>"$OUT/load/$m.err" ||
      echo "inferd-load $m s=$s failed: $(tail -n 2 "$OUT/load/$m.err" | tr '\n' ' ')" | tee -a "$OUT/failures.txt" >&2
  done
  case $m in *_t*) curl -s "http://127.0.0.1:$HTTP/metrics" | grep "model=\"$m\"" | grep latency_target \
    >"$OUT/load/$m.policy.txt" || true ;; esac
done
"$PY" "$HERE/delays_table.py" "$OUT" | tee "$OUT/table.txt"
exit "${PIPESTATUS[0]}"
