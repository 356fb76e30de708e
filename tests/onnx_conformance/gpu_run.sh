#!/usr/bin/env bash
# tests/onnx_conformance/gpu_run.sh: issue 34's conformance check on GPU instances, in one device call.
# ONNX's backend node tests (and the folded parameter cases) served by one CUDA build of inferd on CPU
# instances and on GPU instances, the GPU's results against the CPU plan's (gpu_summary.py): every case
# the CPU passes must pass on GPU (directly or through host fallback), and the passing cases that ran no
# node on the host are counted, from each load's ready line (run.py --placement).
#
#   here:   tests/onnx_conformance/gpu_run.sh pack [BUILD_DIR]   (BUILD_DIR default build: a CUDA build)
#   device: bash tests/onnx_conformance/gpu_run.sh run [PACK_DIR]
#
# pack writes PACK_DIR=.confgpu (git-ignored; about 36 MB: carry .confgpu with the device call; with the
# checkout's ~17 MB that stays under a call's 64 MiB):
#   cases.tar.xz   gen_cases.py's four suites with this checkout's onnx (CI's 1.23.2): cpu and gpu (all
#                  node tests, KIND_CPU / KIND_GPU configs), cpu_folded and gpu_folded (--folded)
#   pydeps.tar.xz  tritonclient and what its gRPC client needs that the device's Python (/opt/torch/.venv,
#                  3.12: numpy, ml_dtypes, onnx; no tritonclient) may lack: grpcio, protobuf, python-rapidjson,
#                  packaging, typing_extensions, as cp312 manylinux wheels installed into a folder (--no-deps)
#   bindir.tar.xz  inferd and its libraries (tests/gpu/pack_bindir.sh, BINS=inferd) in one archive: the
#                  binary's sm_90 kernels (30 MB) compress too
# run unpacks them into a work folder (tests/gpu/bindir_env.sh: LD_LIBRARY_PATH with the device's CUDA
# and torch's nvidia/*/lib), runs the CPU suites (one server each) and the GPU suites (SHARDS servers,
# default 8, one GPU), then gpu_summary.py; results go to $OUT (the device call's returned folder) or
# PACK_DIR/results, at most six files, since a device call brings back only a few files of $OUT:
# summary.md, gpu_regressed.txt, gpu_host_fallback.txt, gpu_pass.txt and run.log (this script's own
# lines) at the top, and everything (the run.py JSON files and logs, those files too) in results.tar.xz.
# Env: PYTHON (default /opt/torch/.venv/bin/python, else python3),
# NO_PYDEPS=1 (use PYTHON's own tritonclient: a local check), SHARDS, DEADLINE_S (no GPU case starts
# after that many seconds, default 300, and a shard still running a minute later is stopped; the folded
# suite gets 40 s more, stopped at 90): at most about 7.5 minutes in all. Exit: gpu_summary.py's (0: every
# CPU pass passes on GPU), 2 on a setup error.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ONNX_VERSION=1.23.2  # what expected_pass.txt was measured with (tests/integration/test_onnx_conformance.py)

pack() {
  local build=${1:-build} pack=$root/.confgpu py=${INFERD_PYTHON:-$root/.venv/bin/python}
  local have
  have=$("$py" -c 'import onnx; print(onnx.__version__)') || exit 2
  if [ "$have" != "$ONNX_VERSION" ]; then
    echo "onnx $have installed; the expected lists are for onnx $ONNX_VERSION (tests/requirements.txt)" >&2
    exit 2
  fi
  if [ ! -x "$build/bin/inferd" ]; then
    echo "no inferd in $build/bin: build it first (a CUDA build)" >&2
    exit 2
  fi
  if ! ldd "$build/bin/inferd" | grep -q libcudart; then
    echo "$build/bin/inferd links no CUDA runtime: configure with CUDA on (nvcc found) for the GPU run" >&2
    exit 2
  fi
  rm -rf "$pack"
  mkdir -p "$pack"
  tmp=$(mktemp -d)  # global: the EXIT trap runs after this function returns
  trap 'rm -rf "$tmp"' EXIT
  echo "== cases (onnx $have)"
  "$py" "$here/gen_cases.py" "$tmp/cases/cpu" || exit 2
  "$py" "$here/gen_cases.py" "$tmp/cases/gpu" --kind KIND_GPU || exit 2
  "$py" "$here/gen_cases.py" "$tmp/cases/cpu_folded" --folded || exit 2
  "$py" "$here/gen_cases.py" "$tmp/cases/gpu_folded" --folded --kind KIND_GPU || exit 2
  # -9: a 64 MiB dictionary spans both kinds' identical models, so the second kind costs almost nothing
  tar -C "$tmp/cases" -cf - cpu gpu cpu_folded gpu_folded | xz -9 -T2 >"$pack/cases.tar.xz" || exit 2
  echo "== python packages for the device (cp312)"
  local triton grpc pb
  triton=$("$py" -c 'import importlib.metadata as m; print(m.version("tritonclient"))')
  grpc=$("$py" -c 'import grpc; print(grpc.__version__)')
  pb=$("$py" -c 'import google.protobuf as p; print(p.__version__)')
  "$py" -m pip install --quiet --target "$tmp/site" --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 "tritonclient==$triton" "grpcio==$grpc" "protobuf==$pb" python-rapidjson \
    packaging typing_extensions || exit 2
  tar -C "$tmp/site" -cf - . | xz -6 -T2 >"$pack/pydeps.tar.xz" || exit 2
  echo "== inferd"
  BINS=inferd bash "$root/tests/gpu/pack_bindir.sh" "$tmp/bindir" "$build" || exit 2
  tar -C "$tmp" -cf - bindir | xz -6 -T2 >"$pack/bindir.tar.xz" || exit 2
  {
    echo "packed $(date -u +%FT%TZ) from $(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo '+changes')"
    echo "onnx $have, tritonclient $triton, grpcio $grpc, protobuf $pb (cp312)"
  } >"$pack/MANIFEST"
  cat "$pack/MANIFEST"
  du -sh "$pack"/*
  echo "carry: .confgpu; device: bash tests/onnx_conformance/gpu_run.sh run"
}

# suite LIMIT NAME ARGS...: one suite (a folder of the unpacked cases) through run.py with the packed
# inferd, sent SIGINT after LIMIT seconds (run.py then writes what it has, the rest "not run: interrupted")
suite() {
  local limit=$1 name=$2
  shift 2
  timeout -s INT -k 30 "$limit" "$PY" "$here/run.py" "$WORK/cases/$name" --inferd "$BINDIR/inferd" \
    --load-timeout 60 "$@"
}

run() {
  local pack=${1:-$root/.confgpu}
  pack=$(cd "$pack" && pwd) || exit 2
  local t0=$SECONDS work tmpdir=/tmp
  # the unpacked binaries, cases and packages (300 MB, 21,000 files) in memory where there is room: on
  # a disk, removing them took 30 s here
  [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')" -gt 1048576 ] 2>/dev/null && tmpdir=/dev/shm
  work=$(mktemp -d "$tmpdir/onnx_conf_gpu.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  tar -C "$work" -xJf "$pack/bindir.tar.xz" || exit 2
  . "$root/tests/gpu/bindir_env.sh" "$work/bindir" "$work"  # BINDIR, WORK, PY, LD_LIBRARY_PATH
  # the suites write into $work/results; what comes back is collected into OUT_DIR on any exit (collect)
  local res=$work/results shards=${SHARDS:-8} deadline=${DEADLINE_S:-300}
  OUT_DIR=${OUT:-$pack/results} RES_DIR=$res WORK_DIR=$work
  mkdir -p "$OUT_DIR" "$res"
  OUT_DIR=$(cd "$OUT_DIR" && pwd)
  trap 'collect "$RES_DIR" "$OUT_DIR"; rm -rf "$WORK_DIR"' EXIT
  exec > >(tee "$res/run.log") 2>&1
  cat "$pack/MANIFEST" 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
    echo "nvidia-smi: no GPU listed (the GPU suites' loads will fail: KIND_GPU but no CUDA device is visible)"
  mkdir -p "$WORK/cases"
  tar -C "$WORK/cases" -xJf "$pack/cases.tar.xz" || exit 2
  if [ "${NO_PYDEPS:-0}" != 1 ]; then
    mkdir -p "$WORK/site"
    tar -C "$WORK/site" -xJf "$pack/pydeps.tar.xz" || exit 2
    export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  # the harness (run.py and tests/integration/inferd_testlib.py, which imports onnx through gen_models.py),
  # the client, and the cases' data as this numpy and ml_dtypes read them (numpy 2's pickles need numpy 2)
  "$PY" - "$WORK/cases/gpu/data" "$here" <<'EOF' || { echo "$PY cannot run the harness (above)" >&2; exit 2; }
import glob, pickle, re, sys
sys.path.insert(0, sys.argv[2])
import run, inferd_testlib, onnx  # noqa: F401
import numpy, ml_dtypes, tritonclient.grpc, google.protobuf, grpc
data = sorted(glob.glob(sys.argv[1] + "/*.pkl"))
for p in data[:1] + [p for p in data if re.search("bfloat16", p, re.I)][:1]:
    pickle.load(open(p, "rb"))
print("python %s, onnx %s, numpy %s, ml_dtypes %s, grpcio %s, protobuf %s, tritonclient from %s"
      % (sys.version.split()[0], onnx.__version__, numpy.__version__, ml_dtypes.__version__, grpc.__version__,
         google.protobuf.__version__, tritonclient.grpc.__file__.rsplit("/", 3)[0]))
EOF
  echo "== CPU instances (one server each) and GPU instances ($shards servers), $(date -u +%T)"
  suite 300 cpu --json "$res/cpu.json" >"$res/cpu.log" 2>&1 &
  local cpu_pid=$!
  suite 300 cpu_folded --json "$res/cpu_folded.json" >"$res/cpu_folded.log" 2>&1 &
  local cpuf_pid=$!
  local pids=() k
  for ((k = 0; k < shards; k++)); do
    # the deadline stops starting cases; a case stuck past it is stopped a minute later, so the call
    # ends inside the device's 10 minutes
    (
      suite $((deadline + 60)) gpu --shard "$k/$shards" --deadline-s "$deadline" --json "$res/gpu.$k.json" \
        --placement "$res/gpu.$k.placement.json" -v >"$res/gpu.$k.log" 2>&1
      suite 90 gpu_folded --shard "$k/$shards" --deadline-s 40 --json "$res/gpu_folded.$k.json" \
        --placement "$res/gpu_folded.$k.placement.json" -v >"$res/gpu_folded.$k.log" 2>&1
    ) &
    pids+=($!)
  done
  wait "$cpu_pid" "$cpuf_pid"
  echo "CPU runs done at +$((SECONDS - t0)) s: $(head -1 "$res/cpu.log"); folded: $(head -1 "$res/cpu_folded.log")"
  wait "${pids[@]}"
  echo "GPU runs done at +$((SECONDS - t0)) s"
  for k in "$res"/gpu.*.log; do tail -1 "$k" | grep -q '^[0-9]* s$' || { echo "$k ended early:"; tail -5 "$k"; }; done
  "$PY" "$here/gpu_summary.py" "$res" --label "$(head -1 "$pack/MANIFEST" 2>/dev/null)"
  local rc=$?
  echo "results: $OUT_DIR ($((SECONDS - t0)) s in all)"
  exit $rc
}

# collect RES OUT: the few files a reader opens first at OUT's top, and all of RES in OUT/results.tar.xz
# (a device call returns at most a handful of files from $OUT, two folders deep)
collect() {
  local res=$1 out=$2 f
  for f in summary.md gpu_regressed.txt gpu_host_fallback.txt gpu_pass.txt; do
    [ -f "$res/$f" ] && cp "$res/$f" "$out/$f"
  done
  sleep 0.2  # the tee of run.log catches up with the last lines
  cp "$res/run.log" "$out/run.log" 2>/dev/null
  tar -C "$res" -cf - . | xz -6 -T2 >"$out/results.tar.xz" || echo "results.tar.xz: tar or xz failed" >&2
}

case ${1:-} in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 pack [BUILD_DIR] | run [PACK_DIR]" >&2; exit 2 ;;
esac
