#!/usr/bin/env bash
# tests/gpu/llm_serve_gpu.sh: inferd's generative backend (inferd_llm) on a GPU against transformers on the
# same GPU (issue 35): (a) greedy FP32 Llama / Qwen2 / Mistral / GPT-2, 32 concurrent staggered requests x
# 200 tokens, token for token; (b) FP16 and BF16 greedy runs held to the runner's normwise logit bounds
# (through what the bound implies for the chosen tokens; plus test_gpu_llm_step when it is in BINDIR);
# (c) a seeded sampled request reproduces; (d) sampling on the device gives the host sampler's tokens.
# What each check means: tests/gpu/llm_serve_gpu.py.
#
#   tests/gpu/llm_serve_gpu.sh BINDIR [WORKDIR]
#
# BINDIR: a folder with the CUDA build's `inferd` (build/bin/inferd; optionally test_k_cuda_llm,
# test_k_cuda_sample and test_gpu_llm_step, which then run too), its
# shared libraries either installed or in BINDIR or BINDIR/lib. WORKDIR (default: a new /tmp folder) gets
# the checkpoints, the model repository and inferd.log. PYTHON (default /opt/torch/.venv/bin/python) needs
# torch with CUDA and transformers. Run from anywhere; ~2 minutes on an H200, killed at 230 s.
# Exit 0 when every check passed, 1 when one failed, 2 when the setup is wrong.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BINDIR="${1:-}"
if [ -z "$BINDIR" ] || [ ! -x "$BINDIR/inferd" ]; then
  echo "usage: $0 BINDIR [WORKDIR]   (BINDIR must hold an executable 'inferd'; got '${BINDIR}')" >&2
  exit 2
fi
BINDIR="$(cd "$BINDIR" && pwd)"
WORK="${2:-$(mktemp -d /tmp/llm_serve_gpu.XXXXXX)}"
mkdir -p "$WORK"
PY="${PYTHON:-/opt/torch/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
export LD_LIBRARY_PATH="$BINDIR:$BINDIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing="$(ldd "$BINDIR/inferd" 2>/dev/null | grep 'not found' || true)"
if [ -n "$missing" ]; then
  echo "inferd's shared libraries are missing (put them in $BINDIR/lib):" >&2
  echo "$missing" >&2
  exit 2
fi
"$PY" -c 'import torch, transformers; assert torch.cuda.is_available(), "torch sees no GPU"; print("python", __import__("sys").version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)' || {
  echo "$PY lacks torch with CUDA or transformers" >&2
  exit 2
}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null || true
echo "work folder: $WORK"
timeout -k 10 230 "$PY" "$HERE/llm_serve_gpu.py" --bin "$BINDIR" --work "$WORK"
rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  echo "RESULT: FAIL (killed after 230 s; the lines above are what finished; inferd.log in $WORK)"
  exit 1
fi
exit $rc
