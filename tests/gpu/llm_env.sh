# tests/gpu/llm_env.sh: the environment the GPU LLM scripts share (tests/gpu/llm_serve_gpu.sh,
# tests/bench/llm/llm_gpu_bench.sh), sourced after `set -u` with the script's arguments:
#
#   LLM_ENV_NAME=llm_serve_gpu . "$(dirname "$0")/../gpu/llm_env.sh" "$@"
#
# Sets BINDIR (argument 1, made absolute; must hold an executable inferd), WORK (argument 2, or a new
# /tmp/$LLM_ENV_NAME.XXXXXX), PY (PYTHON, default /opt/torch/.venv/bin/python, else python3) and
# LD_LIBRARY_PATH (BINDIR, BINDIR/lib or BINDIR/lib.tar.xz unpacked into WORK, then the CUDA toolkit's and
# torch's nvidia/*/lib folders, where a bare GPU machine keeps cuBLAS and cuDNN), checks that inferd's
# libraries resolve and that PY has torch with CUDA and transformers, and prints the GPU and the
# versions. A wrong setup exits 2 saying what.
if [ -z "${1:-}" ] || [ ! -x "$1/inferd" ]; then
  echo "usage: $0 BINDIR [WORKDIR]   (BINDIR must hold an executable 'inferd'; got '${1:-}')" >&2
  exit 2
fi
BINDIR="$(cd "$1" && pwd)"
WORK="${2:-$(mktemp -d "/tmp/${LLM_ENV_NAME:-llm_gpu}.XXXXXX")}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
PY="${PYTHON:-/opt/torch/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
if [ ! -d "$BINDIR/lib" ] && [ -f "$BINDIR/lib.tar.xz" ]; then  # pack_bindir.sh XZ=1's
  mkdir -p "$WORK/bindir_lib" && tar -C "$WORK/bindir_lib" -xJf "$BINDIR/lib.tar.xz" || exit 2
fi
llm_env_libs="$BINDIR:$BINDIR/lib:$WORK/bindir_lib/lib"
for d in /usr/local/cuda/lib64 "$(dirname "$(dirname "$PY")")"/lib/python3*/site-packages/nvidia/*/lib; do
  [ -d "$d" ] && llm_env_libs="$llm_env_libs:$d"
done
export LD_LIBRARY_PATH="$llm_env_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset llm_env_libs
llm_env_missing="$(ldd "$BINDIR/inferd" 2>/dev/null | grep 'not found' || true)"
if [ -n "$llm_env_missing" ]; then
  echo "inferd's shared libraries are missing (put them in $BINDIR/lib):" >&2
  echo "$llm_env_missing" >&2
  exit 2
fi
unset llm_env_missing
"$PY" -c 'import sys, torch, transformers; assert torch.cuda.is_available(), "torch sees no GPU"; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)' || {
  echo "$PY lacks torch with CUDA or transformers" >&2
  exit 2
}
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader 2>/dev/null || true
echo "binaries: $BINDIR; work folder: $WORK"
