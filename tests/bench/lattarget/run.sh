#!/usr/bin/env bash
# Issue 37's done-when on one model, in one call: the latency target against the best fixed configuration that
# inferd-tune finds, at targets 5/20/50 ms p99 under 64 and 512 closed-loop streams.
#   1. models.py: the base repository (resnet50: the committed torchvision graph, FP32 images in; bert_base: s128,
#      exported with torch there; mlp: the example model's seed MLP, for the CPU dry run);
#   2. inferd-tune, time-boxed (TUNE_S): objective max throughput at p99 <= the loosest target, load levels = the
#      stream counts (closed loop), the space of TUNE_SPACE; its points.csv, report.html, config.pbtxt and log
#      go to OUT/tune/;
#   3. pick.py: per (target, streams) cell, the best fixed configuration inferd-tune measured (the worse of its
#      measurements at those streams, p99 within the target), and per target a latency-target configuration
#      (inferd-tune's winner's instances and precision, max batch the space's largest, no delay);
#   4. one server with all of them: per stream count, each picked fixed configuration measured again and each
#      target model (a WARM_S level first: the policy learns compute times from the batches it runs, then DUR s);
#      the policy's /metrics per target model;
#   5. table.py: per cell the target's throughput and p99 beside the best fixed one's, their ratio, PASS when the
#      p99 is met and the ratio >= 0.9 (OUT/table.md; exit 1 when a cell fails).
#
#   bash tests/bench/lattarget/run.sh BIN_DIR MODEL OUT      (BIN_DIR holds inferd and inferd-load)
#
# Env: KIND (gpu | cpu, default gpu), PRECISION (fp16), TARGETS (5,20,50), STREAMS ("64 512"), TUNE_S (230: the
#   search's budget; it may run one configuration past it, and its confirmations), TUNE_SPACE (inferd-tune's space
#   flags; default per model below), TUNE_DUR (2.5: s per tune level), DUR (8: s per measured level of step 4),
#   WARM_S (3), PREP_S (--model-prepare-budget-s for both servers, 5: a configuration loads in seconds, sizes left
#   out run padded; SERVE_PREP_S: step 4's alone, default PREP_S), CONNS (inferd-load --connections, 8), THREADS (inferd-load --threads, 8), READY_S (180),
#   PYTHON (models.py: numpy, onnx; torch and transformers for BERT: /opt/torch/.venv/bin/python where it
#   exists), TUNE_PYTHON (inferd-tune and pick.py: tritonclient's protos; default PYTHON), BERT_ONNX (an export
#   written before), SEQ (128), MAX_BATCH (the base config's; default the space's largest), DEADLINE_S (520: step 4
#   measures nothing that would end past it, so the table prints inside a 9-minute call), WORK (/tmp/lattarget_MODEL:
#   the repositories).
set -u
T0=$SECONDS
BIN=$(cd "${1:?usage: run.sh BIN_DIR MODEL OUT}" && pwd)
MODEL=${2:?usage: run.sh BIN_DIR MODEL OUT}
OUT=${3:?usage: run.sh BIN_DIR MODEL OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
if [ -z "${PYTHON:-}" ]; then
  if [ -x /opt/torch/.venv/bin/python ]; then PYTHON=/opt/torch/.venv/bin/python
  elif [ -x "$ROOT/.venv/bin/python" ]; then PYTHON=$ROOT/.venv/bin/python
  else PYTHON=python3; fi
fi
TPY=${TUNE_PYTHON:-$PYTHON}
KIND=${KIND:-gpu}
TARGETS=${TARGETS:-5,20,50}
STREAMS=${STREAMS:-"64 512"}
DUR=${DUR:-8} WARM_S=${WARM_S:-3} PREP_S=${PREP_S:-5} READY_S=${READY_S:-180} DEADLINE_S=${DEADLINE_S:-520}
CONNS=${CONNS:-8} THREADS=${THREADS:-8}
TUNE_S=${TUNE_S:-230} TUNE_DUR=${TUNE_DUR:-2.5}
case $MODEL in
  resnet50) d_space="--instances 1,2,4 --max-batch-sizes 16,32,64,128 --queue-delays-us 0,500,2000,8000" ;;
  bert_base) d_space="--instances 1,2,4 --max-batch-sizes 16,32,64 --queue-delays-us 0,500,2000,8000" ;;
  mlp) d_space="--instances 1,2 --max-batch-sizes 8,64 --queue-delays-us 0,1000" ;;
  *) echo "MODEL is resnet50, bert_base or mlp" >&2; exit 2 ;;
esac
TUNE_SPACE=${TUNE_SPACE:-"$d_space --preferred none,max"}
# the space's largest max batch size: the base config's and the target models'
space_mbs=$(sed -n 's/.*--max-batch-sizes \([0-9,]*\).*/\1/p' <<<"$TUNE_SPACE" | tr ',' '\n' | sort -n | tail -n 1)
MAX_BATCH=${MAX_BATCH:-${space_mbs:-64}}
loosest=$(tr ',' '\n' <<<"$TARGETS" | sort -g | tail -n 1)
streams_csv=$(tr ' ' ',' <<<"$STREAMS")
export PYTHONUNBUFFERED=1
rm -rf "$OUT"
mkdir -p "$OUT/load" "$OUT/tune"
OUT=$(cd "$OUT" && pwd)
work=${WORK:-/tmp/lattarget_$MODEL}   # the models: not under $OUT (only logs, CSVs and the report travel back)
rm -rf "$work"
mkdir -p "$work"
say() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*" | tee -a "$OUT/steps.txt"; }
say "model $MODEL, kind $KIND, targets $TARGETS ms, streams $STREAMS; $(nproc) CPUs; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"

# --- 1. the base repository
line=$("$PYTHON" "$HERE/models.py" "$MODEL" "$work/base" --kind "$KIND" --precision "${PRECISION:-fp16}" \
  --max-batch "$MAX_BATCH" --seq "${SEQ:-128}" ${BERT_ONNX:+--bert-onnx "$BERT_ONNX"} 2>"$OUT/models.log" | tail -n 1)
read -r _ REPO LOAD_ARGS <<<"$line"
[ -n "${REPO:-}" ] && [ -f "$REPO/$MODEL/config.pbtxt" ] ||
  { say "models.py failed: $(tail -n 5 "$OUT/models.log")"; exit 1; }
say "1. base repository $REPO ${LOAD_ARGS:+(load: $LOAD_ARGS)}"
load_args=(--connections "$CONNS" --threads "$THREADS")
read -r -a extra <<<"$LOAD_ARGS"
load_args+=("${extra[@]}")

# --- 2. inferd-tune, time-boxed
tl=()
for x in "${load_args[@]}"; do tl+=("--load-arg=$x"); done
[ "$KIND" = gpu ] && kp=(--kinds gpu --precisions "${PRECISION:-fp16}") || kp=(--kinds cpu)
read -r -a space <<<"$TUNE_SPACE"
say "2. inferd-tune: max throughput at p99 <= $loosest ms, concurrency $streams_csv, budget $TUNE_S s"
timeout -k 10 $((TUNE_S + 90)) "$TPY" "$ROOT/clients/inferd-tune" --model-repository "$REPO" -m "$MODEL" \
  --objective throughput --p99-ms "$loosest" --concurrency "$streams_csv" --duration-s "$TUNE_DUR" --warmup-s 1 \
  --budget-s "$TUNE_S" --refine 0 --no-retry --confirm 2 "${kp[@]}" "${space[@]}" "${tl[@]}" \
  --server-arg=--model-prepare-budget-s --server-arg="$PREP_S" \
  --inferd "$BIN/inferd" --inferd-load "$BIN/inferd-load" --out "$OUT/tune" >"$OUT/tune/tune.log" 2>&1
trc=$?
say "   inferd-tune exit $trc: $(grep -E '^(measured|best|NONE)' "$OUT/tune/tune.log" | tr '\n' ' ')"
[ -s "$OUT/tune/points.csv" ] || { say "inferd-tune wrote no points: $(tail -n 5 "$OUT/tune/tune.log")"; exit 1; }

# --- 3. the cells' fixed configurations and the target configurations
"$TPY" "$HERE/pick.py" "$REPO" "$MODEL" "$OUT/tune" "$work/repo" "$OUT/cells.json" --targets "$TARGETS" \
  --streams "$streams_csv" --max-batch "$MAX_BATCH" >"$OUT/pick.txt" 2>&1 ||
  { say "pick.py failed: $(tail -n 5 "$OUT/pick.txt")"; exit 1; }
sed 's/^/   /' "$OUT/pick.txt" | tee -a "$OUT/steps.txt"
for d in "$work/repo"/*/; do cp "$d/config.pbtxt" "$OUT/load/$(basename "$d").config.pbtxt"; done

# --- 4. one server with all of them
"$BIN/inferd" --model-repository "$work/repo" --grpc-port 0 --http-port 0 --model-prepare-budget-s "${SERVE_PREP_S:-$PREP_S}" \
  >"$OUT/inferd.stdout" 2>"$OUT/inferd.log" &
SRV=$!
trap 'kill -TERM $SRV 2>/dev/null; wait $SRV 2>/dev/null' EXIT
GRPC="" HTTP=""
for _ in $(seq 1 $((READY_S * 5))); do
  l=$(grep -m1 "inferd ready: grpc=" "$OUT/inferd.log" 2>/dev/null || true)
  if [ -n "$l" ]; then
    GRPC=$(sed -n 's/.*grpc=\([0-9]*\).*/\1/p' <<<"$l") HTTP=$(sed -n 's/.*http=\([0-9]*\).*/\1/p' <<<"$l")
    break
  fi
  kill -0 $SRV 2>/dev/null || break
  sleep 0.2
done
[ -n "$GRPC" ] || { say "inferd did not start: $(tail -n 5 "$OUT/inferd.log")"; exit 1; }
say "4. server ready ($(ls "$work/repo" | tr '\n' ' '))"
measure() {  # model streams seconds csv|-
  local o=()
  if [ $((SECONDS - T0 + $3 + 5)) -gt "$DEADLINE_S" ]; then
    say "   $1 s=$2 not measured: DEADLINE_S $DEADLINE_S s reached"
    return
  fi
  [ "$4" != - ] && o=(--server-stats --csv "$4")
  "$BIN/inferd-load" -u "127.0.0.1:$GRPC" -m "$1" --concurrency-range "$2:$2:1" --duration-s "$3" \
    "${load_args[@]}" "${o[@]}" >>"$OUT/load/$1.txt" 2>>"$OUT/load/$1.err" ||
    say "   inferd-load $1 s=$2 failed: $(tail -n 2 "$OUT/load/$1.err" | tr '\n' ' ')"
}
row() { tail -n 1 "$1" 2>/dev/null | awk -F, '{printf "%.0f infer/s, p99 %.2f ms, errors %s, batch %s", $3, $9/1000, $11, $16}'; }
for s in $STREAMS; do
  for f in $("$TPY" -c "import json,sys; print(' '.join(sorted({c['fixed_model'] for c in json.load(open(sys.argv[1]))['cells'] if c['fixed_model'] and c['streams'] == int(sys.argv[2])})))" "$OUT/cells.json" "$s"); do
    measure "$f" "$s" "$WARM_S" -
    measure "$f" "$s" "$DUR" "$OUT/load/$f.s$s.csv"
    say "   $f s=$s: $(row "$OUT/load/$f.s$s.csv")"
  done
  for t in $(tr ',' ' ' <<<"$TARGETS"); do
    m=${MODEL}_t${t/./p}
    measure "$m" "$s" "$WARM_S" -
    measure "$m" "$s" "$DUR" "$OUT/load/$m.s$s.csv"
    curl -s "http://127.0.0.1:$HTTP/metrics" | grep "model=\"$m\"" | grep latency_target >"$OUT/load/$m.s$s.policy.txt"
    say "   $m s=$s: $(row "$OUT/load/$m.s$s.csv")"
  done
done
kill -TERM $SRV 2>/dev/null
wait $SRV 2>/dev/null
trap - EXIT
say "5. table"
"$TPY" "$HERE/table.py" "$OUT" | tee "$OUT/table.md"
rc=${PIPESTATUS[0]}
say "done in $((SECONDS - T0)) s"
exit "$rc"
