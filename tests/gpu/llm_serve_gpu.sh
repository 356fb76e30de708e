#!/usr/bin/env bash
# tests/gpu/llm_serve_gpu.sh: inferd's generative backend (inferd_llm) on a GPU against transformers on the
# same GPU (issue 35): (a) greedy FP32 Llama / Qwen2 / Mistral / GPT-2, 32 concurrent staggered requests x
# 200 tokens, token for token; (b) FP16 and BF16 greedy runs held to the runner's normwise logit bounds
# (through what the bound implies for the chosen tokens; plus test_gpu_llm_step when it is in BINDIR);
# (c) a seeded sampled request reproduces. What each check means: tests/gpu/llm_serve_gpu.py.
#
#   tests/gpu/llm_serve_gpu.sh BINDIR [WORKDIR]
#
# BINDIR: a folder with the CUDA build's `inferd` (build/bin/inferd; optionally test_k_cuda_llm and
# test_gpu_llm_step, which then run too), its
# shared libraries either installed or in BINDIR or BINDIR/lib. WORKDIR (default: a new /tmp folder) gets
# the checkpoints, the model repository and inferd.log. PYTHON (default /opt/torch/.venv/bin/python) needs
# torch with CUDA and transformers (the setup, shared with llm_gpu_bench.sh: tests/gpu/llm_env.sh).
# Run from anywhere; ~2 minutes on an H200, killed at 230 s.
# Exit 0 when every check passed, 1 when one failed, 2 when the setup is wrong.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LLM_ENV_NAME=llm_serve_gpu . "$HERE/llm_env.sh" "$@"
timeout -k 10 230 "$PY" "$HERE/llm_serve_gpu.py" --bin "$BINDIR" --work "$WORK"
rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  echo "RESULT: FAIL (killed after 230 s; the lines above are what finished; inferd.log in $WORK)"
  exit 1
fi
exit $rc
