#!/usr/bin/env bash
# A small variant of device_bundle.sh for the cuDNN module alone: builds
# test_cuda_conv for Hopper (sm_90) against the cuDNN wheel in .cudnn/
# (pip install --target .cudnn nvidia-cudnn-cu13) and puts it in .devrun/bin
# with the few non-CUDA libraries it loads. cuDNN itself comes from the GPU
# machine (its headers' version may differ; the legacy API is stable across
# 9.x). There:
#   export LD_LIBRARY_PATH=<site-packages>/nvidia/cudnn/lib:/usr/local/cuda/lib64
#   .devrun/bin/test_cuda_conv --bench
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFERD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DINFERD_CUDNN=ON -DCUDNN_ROOT="${CUDNN_ROOT:-$root/.cudnn/nvidia/cudnn}" -DINFERD_WERROR=ON \
  -DINFERD_PYTHON="${INFERD_PYTHON:-$root/.venv/bin/python}" >/dev/null
cmake --build build-gpu -j "$(nproc)" --target test_cuda_conv
rm -rf .devrun
mkdir -p .devrun/bin .devrun/lib
cp build-gpu/bin/test_cuda_conv .devrun/bin/
bash "$root/tests/gpu/bundle_libs.sh" .devrun
du -sh .devrun
