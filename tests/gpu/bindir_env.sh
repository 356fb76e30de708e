# shellcheck shell=bash
# tests/gpu/bindir_env.sh: the binaries-and-libraries half of the GPU scripts' environment, for a folder
# tests/gpu/pack_bindir.sh made; sourced after `set -u` with the script's arguments (llm_env.sh sources it
# and adds its torch checks; tests/onnx_conformance/gpu_run.sh sources it alone):
#
#   BINDIR_ENV_NAME=name . "$root/tests/gpu/bindir_env.sh" BINDIR [WORKDIR]
#
# Sets BINDIR (argument 1, made absolute; must hold an executable inferd), WORK (argument 2, or a new
# /tmp/$BINDIR_ENV_NAME.XXXXXX), PY (PYTHON, default /opt/torch/.venv/bin/python, else python3) and
# LD_LIBRARY_PATH (BINDIR, BINDIR/lib or BINDIR/lib.tar.xz unpacked into WORK, then the CUDA toolkit's and
# PY's nvidia/*/lib folders, where a bare GPU machine keeps cuBLAS and cuDNN: torch's wheels), and checks
# that inferd's libraries resolve. A wrong setup exits 2 saying what.
if [ -z "${1:-}" ] || [ ! -x "$1/inferd" ]; then
  echo "usage: $0 BINDIR [WORKDIR]   (BINDIR must hold an executable 'inferd'; got '${1:-}')" >&2
  exit 2
fi
BINDIR="$(cd "$1" && pwd)"
WORK="${2:-$(mktemp -d "/tmp/${BINDIR_ENV_NAME:-gpu_run}.XXXXXX")}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
PY="${PYTHON:-/opt/torch/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
if [ ! -d "$BINDIR/lib" ] && [ -f "$BINDIR/lib.tar.xz" ]; then  # pack_bindir.sh XZ=1's
  mkdir -p "$WORK/bindir_lib" && tar -C "$WORK/bindir_lib" -xJf "$BINDIR/lib.tar.xz" || exit 2
fi
bindir_env_libs="$BINDIR:$BINDIR/lib:$WORK/bindir_lib/lib"
for d in /usr/local/cuda/lib64 "$(dirname "$(dirname "$PY")")"/lib/python3*/site-packages/nvidia/*/lib; do
  [ -d "$d" ] && bindir_env_libs="$bindir_env_libs:$d"
done
export LD_LIBRARY_PATH="$bindir_env_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset bindir_env_libs
bindir_env_missing="$(ldd "$BINDIR/inferd" 2>/dev/null | grep 'not found' || true)"
if [ -n "$bindir_env_missing" ]; then
  echo "inferd's shared libraries are missing (put them in $BINDIR/lib):" >&2
  echo "$bindir_env_missing" >&2
  exit 2
fi
unset bindir_env_missing
