#!/usr/bin/env bash
# Builds inferd for Hopper (sm_90) on this GPU-less machine and gathers what
# a GPU machine needs to run the GPU tests into .devrun/ (git-ignored): the
# binaries and the non-CUDA shared libraries they load (gRPC, abseil,
# protobuf-c, libuv, OpenBLAS...). The CUDA libraries come from the GPU
# machine's own CUDA 13 toolkit. There:
#   for f in .devrun/lib/*.xz; do unxz -f "$f"; done
#   LD_LIBRARY_PATH=.devrun/lib:/usr/local/cuda/lib64 bash tests/gpu/run_all.sh .devrun/bin
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFERD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DINFERD_PYTHON="${INFERD_PYTHON:-$root/.venv/bin/python}" >/dev/null
cmake --build build-gpu -j "$(nproc)"
rm -rf .devrun
mkdir -p .devrun/bin .devrun/lib
# only what runs there: the server, the GPU tests, the benchmarks
cp build-gpu/bin/inferd build-gpu/bin/inferd-load build-gpu/bin/test_cuda_* build-gpu/bin/test_k_cuda_* build-gpu/bin/bench_* .devrun/bin/
cp build-gpu/bin/test_gpu_* .devrun/bin/ 2>/dev/null || true
bash "$root/tests/gpu/bundle_libs.sh" .devrun
# OpenBLAS is 36 MB and compresses 8x: unpack it there with
#   for f in .devrun/lib/*.xz; do unxz -f "$f"; done
xz -T0 -6 -f .devrun/lib/libopenblas.so.0
# models for test_gpu_plan (the CPU plan is its oracle)
"${INFERD_PYTHON:-$root/.venv/bin/python}" tests/unit/engine/gen_test_models.py .devrun/gpu_plan_models >/dev/null
# checkpoints for test_gpu_llm_step (the fixtures of tests/llm, rebuilt with numpy)
"${INFERD_PYTHON:-$root/.venv/bin/python}" tests/llm/write_ckpts.py .devrun/llm_ckpts >/dev/null
du -sh .devrun
