#!/usr/bin/env bash
# Cold start (issue 32 item 2, "from the first second"): is a model as fast in
# its first seconds after READY as in steady state? On the GPU machine, from
# the repository root, after bundle.sh:
#   bash tests/bench/coldstart/run.sh .devrun-coldstart
# For each budget in BUDGETS (--model-prepare-budget-s; default "60 0": every
# size the budget allows, then only 1, the preferred sizes and the largest),
# a fresh server loads a ResNet-50 (torchvision's, seeded random weights,
# exported here with torch at opset 17, dynamic batch) on one GPU instance,
# and the moment it says ready, inferd-load keeps CONC (256) one-image
# requests in flight for DURATION (20) s, reporting every second. Prints the
# load time (start to ready, and the instance's own preparation line), the
# images/s and latency of every second, and the ratio of the first 10 s to
# the steady state (the last 10 s); the issue asks >= 0.8. Then the lazy
# prepares (should be 0) and the padded batches from /metrics.
# Env: MBS (max_batch_size, 256), PREC (fp16), INSTANCES (1), PREFERRED
# (preferred_batch_size list, none), CONC, DURATION, BUDGETS, MODEL_DIR (an
# exported resnet50.onnx already there). Logs and JSON go to $OUT (or
# /tmp/coldstart).
set -u
b=$(cd "$1" && pwd)
out=${OUT:-/tmp/coldstart}
mkdir -p "$out"
py=python3
MBS=${MBS:-256} PREC=${PREC:-fp16} INSTANCES=${INSTANCES:-1} CONC=${CONC:-256} DURATION=${DURATION:-20}
BUDGETS=${BUDGETS:-60 0} PREFERRED=${PREFERRED:-}
cudnn=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
[ -e "$cudnn/libcudnn.so.9" ] || cudnn=$(dirname "$(find /opt /usr -name libcudnn.so.9 2>/dev/null | head -1)")
[ -d "$b/lib" ] || tar -C "$b" -xJf "$b/lib.tar.xz"
export LD_LIBRARY_PATH=$b/lib:$cudnn:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
models=${MODEL_DIR:-/tmp/coldstart_models}  # not under $OUT: only logs travel back
if [ ! -e "$models/resnet50.onnx" ]; then
  PYTHONUNBUFFERED=1 $py tests/bench/engine/bench_torch_vision.py --out "$models" --models resnet50 --export-only \
    >"$out/export.log" 2>&1 || { echo "export failed:"; tail -20 "$out/export.log"; exit 1; }
fi
repo=/tmp/coldstart_repo
rm -rf "$repo" && mkdir -p "$repo/resnet50/1"
cp "$models/resnet50.onnx" "$repo/resnet50/1/model.onnx"
pref=""
[ -n "$PREFERRED" ] && pref="preferred_batch_size: [ $PREFERRED ]"
cat >"$repo/resnet50/config.pbtxt" <<CFG
name: "resnet50"
backend: "onnxruntime"
max_batch_size: $MBS
input [ { name: "input", data_type: TYPE_FP32, dims: [ 3, 224, 224 ] } ]
output [ { name: "logits", data_type: TYPE_FP32, dims: [ 1000 ] } ]
instance_group [ { count: $INSTANCES, kind: KIND_GPU, gpus: [ 0 ] } ]
dynamic_batching { $pref }
parameters { key: "precision" value: { string_value: "$PREC" } }
CFG
for budget in $BUDGETS; do
  tag=budget$budget
  log=$out/server_$tag.log
  t0=$(date +%s.%N)
  "$b/bin/inferd" --model-repository "$repo" --grpc-port 0 --http-port 0 --log-level info \
    --model-prepare-budget-s "$budget" 2>"$log" &
  srv=$!
  ports=""
  for _ in $(seq 1 3000); do  # 10 min at most
    ports=$(grep -m1 -oE 'inferd ready: grpc=[0-9]+ http=[0-9]+' "$log" || true)
    [ -n "$ports" ] && break
    kill -0 $srv 2>/dev/null || break
    sleep 0.2
  done
  t1=$(date +%s.%N)
  if [ -z "$ports" ]; then echo "$tag: the server never said ready"; tail -20 "$log"; kill $srv 2>/dev/null; wait $srv; continue; fi
  grpc=$(echo "$ports" | sed -E 's/.*grpc=([0-9]+).*/\1/')
  http=$(echo "$ports" | sed -E 's/.*http=([0-9]+).*/\1/')
  "$b/bin/inferd-load" -u "127.0.0.1:$grpc" -m resnet50 --concurrency-range "$CONC:$CONC:1" -b 1 \
    --duration-s "$DURATION" --report-every-s 1 --json "$out/load_$tag.json" >"$out/load_$tag.txt" 2>&1
  echo "inferd-load: exit $?"
  $py - "$tag" "$t0" "$t1" "$log" "$out/load_$tag.json" "$http" "$DURATION" <<'PY'
import json, re, sys, urllib.request
tag, t0, t1, log, path, http, dur = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], float(sys.argv[7])
print("== %s: ready %.1f s after start" % (tag, t1 - t0))
for l in open(log):
    if "prepared in" in l or "is ready" in l:
        print("   " + l.strip())
doc = json.load(open(path))
lv = doc[0] if isinstance(doc, list) else doc
periods = lv["periods"]
print("   %5s %9s %9s %9s" % ("s", "img/s", "p50_ms", "p99_ms"))
rate = []
for p in periods:
    r = p["valid"]["ok"] / p["seconds"] if p["seconds"] > 0 else 0
    rate.append((p["start_s"], r))
    print("   %5.0f %9.0f %9.1f %9.1f" % (p["start_s"], r, p["valid"]["p50_us"] / 1e3, p["valid"]["p99_us"] / 1e3))
half = dur / 2
first = [r for s, r in rate if s < half]
steady = [r for s, r in rate if s >= half]
f = sum(first) / len(first) if first else 0
st = sum(steady) / len(steady) if steady else 0
print("   first %.0f s: %.0f img/s; steady (last %.0f s): %.0f img/s; ratio %.3f (>= 0.8 wanted)" %
      (half, f, dur - half, st, f / st if st else 0))
try:
    text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % http, timeout=10).read().decode()
    for name in ("inferd_lazy_prepares_total", "inferd_lazy_prepare_causes_total", "inferd_padded_batches_total", "inferd_padded_rows_total",
                 "inferd_instance_prepared_batch_sizes", "inferd_instance_prepare_seconds"):
        for l in text.splitlines():
            if l.startswith(name + "{") and 'model="resnet50"' in l:
                print("   " + l)
except Exception as e:
    print("   /metrics: %s" % e)
PY
  kill -TERM $srv; wait $srv
done
