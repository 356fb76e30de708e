#!/usr/bin/env bash
# One GPU-machine call of issue 37's figures for one model (run.sh beside this file; README.md there: each step's
# expected time and what the time box costs), from the repository root:
#   bash tests/bench/lattarget/device.sh .devrun-lat37 resnet50     (call 1, ~7.5 min)
#   TUNE_S=200 bash tests/bench/lattarget/device.sh .devrun-lat37 bert_base    (call 2, ~8 min: the export first)
# BUNDLE is the folder bundle.sh wrote (carried: carry [".devrun-lat37"]). Unpacks the binaries, makes the
# device's CUDA and cuDNN libraries visible, installs the wheels (no index) into BUNDLE/site unless the torch
# venv already imports tritonclient's protos, and runs run.sh with OUT=$OUT/lat37_<model> (or /tmp/...): the
# tune's points.csv, report.html, config.pbtxt and log, every load CSV, the server log and table.md come back.
# Env: everything run.sh takes (TUNE_S, DUR, ...).
set -u
b=$(cd "${1:?usage: device.sh BUNDLE MODEL}" && pwd)
model=${2:?usage: device.sh BUNDLE MODEL}
root=$(cd "$(dirname "$0")/../../.." && pwd)
[ -x "$b/bin/inferd" ] || tar -C "$b" -xJf "$b/bundle.tar.xz" || exit 1
cudnn=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
[ -e "$cudnn/libcudnn.so.9" ] || cudnn=$(dirname "$(find /opt /usr -name libcudnn.so.9 2>/dev/null | head -n 1)")
export LD_LIBRARY_PATH=$b/lib:$cudnn:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
py=${PYTHON:-/opt/torch/.venv/bin/python}
[ -x "$py" ] || py=python3
check='import tritonclient.grpc.model_config_pb2, google.protobuf.text_format'
tpy=$py
if ! "$py" -c "$check" 2>/dev/null; then
  if [ ! -d "$b/site" ]; then
    whl=("$b"/wheels/*.whl)
    "$py" -c 'import ml_dtypes' 2>/dev/null || whl+=("$b"/wheels/extra/ml_dtypes-*.whl)
    "$py" -c 'import packaging.version' 2>/dev/null || whl+=("$b"/wheels/extra/packaging-*.whl)
    # a venv without pip: a wheel is a zip laid out for site-packages, so unpacking it is an install
    "$py" -m pip install -q --no-index --no-deps --target "$b/site" "${whl[@]}" ||
      "$py" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
        "$b/site" "${whl[@]}" || exit 1
  fi
  # a wrapper: the wheels on inferd-tune's and pick.py's path only, not on the exporter's (onnx keeps its protobuf)
  tpy=$b/tune-python
  printf '#!/bin/sh\nPYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' "$b/site" "$py" >"$tpy"
  chmod +x "$tpy"
  "$tpy" -c "$check" || { echo "tritonclient's protos do not import even with $b/site" >&2; exit 1; }
fi
out=${OUT:-/tmp}/lat37_$model
echo "commit $(cat "$b/commit.txt" 2>/dev/null); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
PYTHON=$py TUNE_PYTHON=$tpy bash "$root/tests/bench/lattarget/run.sh" "$b/bin" "$model" "$out"
rc=$?
du -sh "$out"
exit $rc
