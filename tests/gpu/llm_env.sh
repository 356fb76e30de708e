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
# versions. A wrong setup exits 2 saying what. The binaries' and libraries' part is tests/gpu/bindir_env.sh.
BINDIR_ENV_NAME="${LLM_ENV_NAME:-llm_gpu}" . "$(dirname "${BASH_SOURCE[0]}")/bindir_env.sh" "$@"
"$PY" -c 'import sys, torch, transformers; assert torch.cuda.is_available(), "torch sees no GPU"; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)' || {
  echo "$PY lacks torch with CUDA or transformers" >&2
  exit 2
}
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader 2>/dev/null || true
echo "binaries: $BINDIR; work folder: $WORK"
