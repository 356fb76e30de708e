#!/usr/bin/env bash
# A model served: inferd (dynamic batching) against the anchors' Python peer (grpc.aio + a PyTorch
# batcher, peer.py beside this file), both driven by the anchors' loadc with the same request bytes at
# 1 stream (lone latency) and 64 streams, server and load pinned to separate cores; prints one table
# (req/s, p50, p99, inferd/peer ratio). MODEL=seedcnn (default): the seeds' CNN, one 3x112x112 FP32
# image per call. MODEL=bert: tests/bench/bert's BERT-base encoder, one sequence of SEQ tokens per call
# (input_ids and attention_mask INT64 [1,SEQ]; last_hidden_state back), issue 12's served goal.
#
#   tests/bench/vision/served/run.sh BUNDLE OUT_DIR     (from the repository root)
#
# BUNDLE: what bundle.sh gathers (bin/inferd, bin/loadc, kserve_min.desc, lib.tar.xz or lib/); on
# this machine a build works too: BUNDLE with bin/inferd and bin/loadc. Writes OUT_DIR/repo (the
# seed CNN, tests/models/zoo/graphs/seedcnn.ts17 with fill.py's seeded weights: the peer loads the
# same file; or the BERT that tests/bench/bert/bench_torch_bert.py --export-only writes, with the .pt
# of the same weights the peer loads), logs, results.jsonl and table.md.
# Env: KIND (KIND_GPU; KIND_CPU for a CPU-only run), VARIANTS (inferd configs, "precision:delay_us:
#      instances" each; default "fp16:0:1 fp16:500:2" on GPU, "fp32:0:1" on CPU), STREAMS ("1 64"),
#      SECS (4 per point, after loadc's 1 s warm-up), SERVER_CORES / LOAD_CORES (first / second half
#      of the CPUs), PYTHON (needs numpy, onnx, protobuf; the peer also torch and grpcio; default
#      /opt/torch/.venv/bin/python when present, else python3), PEER (1; 0 skips it), MAX_BATCH (64),
#      INFERD_ARGS (extra server flags), READY_TIMEOUT (s, 600), MODEL (seedcnn | bert);
#      for bert: SEQ (128), BERT_ONNX (the model; default $MODELS/bert_base.onnx, MODELS /tmp/bert_models,
#      exported there when missing: PYTHON needs torch and transformers then), VOCAB (30522, the ids' range).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../../script_args.sh"
script_args "$@"
B=$IN_DIR OUT=$OUT_DIR
ROOT=$(cd "$HERE/../../../.." && pwd)
KIND=${KIND:-KIND_GPU}
if [ "$KIND" = KIND_GPU ]; then VARIANTS=${VARIANTS:-"fp16:0:1 fp16:500:2"}; else VARIANTS=${VARIANTS:-"fp32:0:1"}; fi
STREAMS=${STREAMS:-"1 64"}
SECS=${SECS:-4}
MAX_BATCH=${MAX_BATCH:-64}
READY_TIMEOUT=${READY_TIMEOUT:-600}
NCPU=$(nproc)
HALF=$((NCPU / 2))
SERVER_CORES=${SERVER_CORES:-0-$((HALF - 1))}
LOAD_CORES=${LOAD_CORES:-$HALF-$((NCPU - 1))}
script_python
PEER=${PEER:-1}
MODEL=${MODEL:-seedcnn}
SEQ=${SEQ:-128}
RES=$OUT/results.jsonl
: >"$RES"

# --- the bundle's libraries (the GPU machine lacks libgrpc, libdnnl, ...); cuDNN from the torch wheel
# inside tests/bench/vision/bundle.sh's folder the libraries are its lib.tar.xz (one copy travels)
for t in "$B/lib.tar.xz" "$B/../lib.tar.xz"; do
  if [ -f "$t" ] && [ ! -d "$B/lib" ]; then mkdir -p "$B/lib" && tar -C "$B" -xJf "$t"; break; fi
done
cudnn=$(dirname "$(find /opt/torch /usr/local/lib /usr/lib -name 'libcudnn.so.9' 2>/dev/null | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH=$B/lib:${cudnn:+$cudnn:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for x in "$B/bin/inferd" "$B/bin/loadc"; do
  [ -x "$x" ] || { echo "missing $x (run tests/bench/vision/served/bundle.sh)" >&2; exit 1; }
done
DESC=$B/kserve_min.desc
[ -f "$DESC" ] || DESC=$B/bin/kserve_min.desc
[ -f "$DESC" ] || { echo "missing kserve_min.desc in $B" >&2; exit 1; }

echo "== machine: $(nproc) CPUs, $(command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -1 || echo no GPU);" \
  "server on cores $SERVER_CORES, loadc on $LOAD_CORES; $(date -u +%F)"

# --- the model (one file for every server) and the request (peer.py makereq, which needs no torch)
mkdir -p "$OUT/peer"
cp "$HERE/peer.py" "$OUT/peer/peer.py"
cp "$DESC" "$OUT/peer/kserve_min.desc"  # peer.py reads it from beside itself
export INFERD_BENCH_BERT=$ROOT/tests/bench/bert
if [ "$MODEL" = bert ]; then
  NAME=bert_base OUTNAME=last_hidden_state OUTDIMS="1,$SEQ"
  ONNX=${BERT_ONNX:-${MODELS:-/tmp/bert_models}/bert_base.onnx}
  if [ ! -f "$ONNX" ]; then
    echo "== exporting the BERT to $ONNX" >&2
    mkdir -p "$(dirname "$ONNX")"
    "$PYTHON" "$ROOT/tests/bench/bert/bench_torch_bert.py" --out "$(dirname "$ONNX")" --export-only \
      >"$OUT/export.log" 2>&1 || { tail -n 20 "$OUT/export.log" >&2; exit 1; }
  fi
  "$PYTHON" "$OUT/peer/peer.py" makereq "$OUT/req.bin" bert "$SEQ" "${VOCAB:-30522}" || exit 1
else
  NAME=seedcnn OUTNAME=logits OUTDIMS="1,10"
  ONNX=$OUT/seedcnn.onnx
  echo "== seed CNN repository and request" >&2
  if [ ! -f "$ONNX" ]; then
    "$PYTHON" - "$ROOT" "$ONNX" <<'PY' || exit 1
import os, sys
import onnx
root, path = sys.argv[1:3]
sys.path.insert(0, os.path.join(root, "tests", "models", "zoo"))
import fill
onnx.save(fill.fill_model(fill.available()["seedcnn.ts17"], 0), path)
PY
  fi
  "$PYTHON" "$OUT/peer/peer.py" makereq "$OUT/req.bin" || exit 1
fi
mkdir -p "$OUT/repo/$NAME/1"
# a copy (a hard link where one file system holds both): the server refuses a model file that
# resolves outside its model's directory, as a symlink to $ONNX would
rm -f "$OUT/repo/$NAME/1/model.onnx"
ln "$ONNX" "$OUT/repo/$NAME/1/model.onnx" 2>/dev/null || cp "$ONNX" "$OUT/repo/$NAME/1/model.onnx"

# One answer through the same bytes, kept to compare the servers' logits (raw gRPC, the desc's messages).
answer() {  # PORT FILE
  "$PYTHON" - "$1" "$DESC" "$OUT/req.bin" "$2" "$OUTNAME" "$OUTDIMS" <<'PY'
import sys
import grpc
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
port, desc, req, dst, name, dims = sys.argv[1:7]
dims = [int(d) for d in dims.split(",")]  # the leading dims the output must have
pool = descriptor_pool.DescriptorPool()
for f in descriptor_pb2.FileDescriptorSet.FromString(open(desc, "rb").read()).file:
    pool.Add(f)
Resp = message_factory.GetMessageClass(pool.FindMessageTypeByName("inference.ModelInferResponse"))
ch = grpc.insecure_channel("127.0.0.1:%s" % port, options=[("grpc.max_receive_message_length", -1)])
call = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer", request_serializer=None,
                      response_deserializer=Resp.FromString)
r = call(open(req, "rb").read(), timeout=120)
o = r.outputs[0]
y = np.frombuffer(r.raw_output_contents[0], np.float32).reshape(list(o.shape))
assert o.name == name and list(o.shape)[:len(dims)] == dims, (o.name, list(o.shape))
np.save(dst, y)
print("answer:", np.array2string(y.reshape(-1)[:10], precision=3, max_line_width=200))
PY
}

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# loadc shapes per stream count: THREADS CHANNELS INFLIGHT (sweep.sh's for 1, 64 and 512)
shape() {
  case $1 in
    1) echo "1 1 1" ;; 64) echo "4 2 8" ;; 512) echo "8 4 16" ;;
    *) t=$(($1 < 4 ? $1 : 4)); echo "$t 1 $(($1 / t))" ;;
  esac
}

load() {  # NAME PORT
  for n in $STREAMS; do
    # shellcheck disable=SC2046
    line=$(taskset -c "$LOAD_CORES" "$B/bin/loadc" "127.0.0.1:$2" /inference.GRPCInferenceService/ModelInfer \
      "$OUT/req.bin" $(shape "$n") "$SECS")
    echo "$1 $line" | tee -a "$OUT/loadc.txt" >&2
    echo "{\"server\": \"$1\", ${line#\{}" >>"$RES"
  done
}

PID=
stop() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID"
    wait "$PID" 2>/dev/null
  fi
  PID=
}
trap stop EXIT

wait_line() {  # FILE PATTERN what
  for _ in $(seq 1 $((READY_TIMEOUT * 5))); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$PID" 2>/dev/null || { echo "$3 exited before ready:" >&2; tail -n 30 "$1" >&2; return 1; }
    sleep 0.2
  done
  echo "$3 not ready after ${READY_TIMEOUT}s" >&2
  tail -n 30 "$1" >&2
  return 1
}

# --- inferd, one start per variant
for v in $VARIANTS; do
  IFS=: read -r prec delay inst <<<"$v"
  name="inferd $MODEL $KIND $prec delay=${delay}us x$inst"
  if [ "$MODEL" = bert ]; then
    io="input [{ name: \"input_ids\" data_type: TYPE_INT64 dims: [$SEQ] }, { name: \"attention_mask\" data_type: TYPE_INT64 dims: [$SEQ] }]
output [{ name: \"last_hidden_state\" data_type: TYPE_FP32 dims: [$SEQ, -1] }]"
  else
    io='input [{ name: "input" data_type: TYPE_FP32 dims: [3, 112, 112] }]
output [{ name: "logits" data_type: TYPE_FP32 dims: [10] }]'
  fi
  cat >"$OUT/repo/$NAME/config.pbtxt" <<EOF
name: "$NAME"
platform: "onnxruntime_onnx"
max_batch_size: $MAX_BATCH
$io
instance_group [{ count: $inst kind: $KIND }]
dynamic_batching { max_queue_delay_microseconds: $delay }
parameters { key: "precision" value { string_value: "$prec" } }
EOF
  log=$OUT/inferd_${prec}_${delay}_${inst}.log
  echo "== $name" >&2
  # shellcheck disable=SC2086
  taskset -c "$SERVER_CORES" "$B/bin/inferd" --model-repository "$OUT/repo" --grpc-port 0 --http-port 0 \
    ${INFERD_ARGS:-} >/dev/null 2>"$log" &
  PID=$!
  wait_line "$log" '^inferd ready: grpc=' inferd || { stop; continue; }
  port=$(sed -n 's/^inferd ready: grpc=\([0-9]*\).*/\1/p' "$log" | head -1)
  answer "$port" "$OUT/answer_inferd_$prec.npy" >&2 || echo "inferd's answer failed" >&2
  load "$name" "$port"
  stop
done

# --- the peer
peer_name="peer.py $MODEL (torch $([ "$KIND" = KIND_GPU ] && echo 'GPU fp16' || echo 'CPU fp32'), 1 ms batcher)"
if [ "$PEER" = 1 ] && "$PYTHON" -c 'import torch, grpc' 2>/dev/null; then
  port=$(free_port)
  echo "== $peer_name on port $port" >&2
  taskset -c "$SERVER_CORES" "$PYTHON" "$OUT/peer/peer.py" "$port" batch "$ONNX" "$MODEL" >"$OUT/peer.log" 2>&1 &
  PID=$!
  if wait_line "$OUT/peer.log" 'peer ready' peer; then
    answer "$port" "$OUT/answer_peer.npy" >&2 || echo "the peer's answer failed" >&2
    load "$peer_name" "$port"
  fi
  stop
else
  echo "== peer skipped: PEER=$PEER, or $PYTHON cannot import torch and grpc" >&2
fi

# --- one table
"$PYTHON" - "$RES" "$OUT" <<'PY' | tee "$OUT/table.md"
import glob, json, os, sys
import numpy as np
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
peer = {r["conc"]: r for r in rows if r["server"].startswith("peer")}
print("| server | streams | req/s | p50 ms | p99 ms | errors | req/s vs peer | p99 vs peer |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    p = peer.get(r["conc"])
    ratio = "%.2fx" % (r["rps"] / p["rps"]) if p and p["rps"] and not r["server"].startswith("peer") else "-"
    p99 = "%.2fx" % (r["p99_us"] / p["p99_us"]) if p and p["p99_us"] and not r["server"].startswith("peer") else "-"
    print("| %s | %d | %.0f | %.2f | %.2f | %d | %s | %s |" % (r["server"], r["conc"], r["rps"], r["p50_us"] / 1e3,
                                                             r["p99_us"] / 1e3, r["errors"], ratio, p99))
ans = {os.path.basename(f)[7:-4]: np.load(f) for f in sorted(glob.glob(os.path.join(sys.argv[2], "answer_*.npy")))}
if "peer" in ans:
    ref = ans["peer"].astype(np.float64)
    for k, y in ans.items():
        if k != "peer":
            d = np.max(np.abs(y - ref)) / max(np.max(np.abs(ref)), 1e-30)
            print("\nlogits of %s vs the peer's for the request: normwise difference %.1e%s" % (
                k, d, "" if d < 5e-2 else "  <- NOT the same model?"))
PY
