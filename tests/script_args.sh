# script_args.sh: the prologue the device scripts that take a folder and an output folder share
# (tests/bench/multigpu/run.sh, tests/bench/serve_gpu/transport.sh, tests/bench/vision/served/run.sh,
# tests/gpu/perf_analyzer_gpu.sh). Sourced, not run:
#   . "$(dirname "$0")/<up to tests>/script_args.sh"
#   script_args "$@"   IN_DIR (the first argument) and OUT_DIR (the second, created), both absolute; with fewer
#                      than two arguments, or a first one that is no folder, the caller's header comment (its
#                      usage) goes to stderr and the script exits 2
#   script_python      PYTHON unless it is set: the GPU machine's /opt/torch/.venv/bin/python (numpy, onnx,
#                      torch) where it exists, else python3
# shellcheck shell=bash

script_args() {
  if [ $# -lt 2 ] || [ ! -d "$1" ]; then
    if [ $# -ge 2 ]; then echo "$0: $1 is not a folder" >&2; fi
    sed -n '2,/^[^#]/{/^#/p}' "$0" >&2
    exit 2
  fi
  IN_DIR=$(cd "$1" && pwd)
  mkdir -p "$2" || exit 2
  OUT_DIR=$(cd "$2" && pwd)
}

script_python() {
  if [ -z "${PYTHON:-}" ]; then
    if [ -x /opt/torch/.venv/bin/python ]; then PYTHON=/opt/torch/.venv/bin/python; else PYTHON=python3; fi
  fi
}
