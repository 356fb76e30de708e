#!/usr/bin/env bash
# Gathers what the GPU machine needs to check InstanceNormalization and
# GroupNormalization on the device (k_group_norm_cuda, issue 34 item 3) into
# one folder (argument; default .devrun-norm, git-ignored): the kernel tests
# (test_k_cuda_groupnorm, test_k_cuda_norm), the GPU plan test
# (test_gpu_plan: every generated model, the norm_* ones included, against
# the CPU plan in every plan mode, and no host node for the norms), the
# server (for tests/gpu/norm_serve_check.py: the norm models on KIND_GPU
# instances against onnxruntime) and the non-CUDA shared libraries they load, all in one bin.tar.xz (a device call
# carries at most 64 MiB; binaries and libraries are 37 MiB unpacked), and
# run.sh (tests/gpu/device_norm_run.sh), the script to run there, from the
# repository's root:
#   bash <folder>/run.sh <folder>
# The models gen_test_models.py writes (34 MiB of random weights, which do
# not compress) are written there by run.sh with the device's Python (onnx,
# onnxruntime, numpy); MODELS=1 bundles them instead.
# Builds nothing: run it after `cmake --build --preset default` (CUDA ON,
# sm_90), or set BUILD to another build folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/.devrun-norm}
build=${BUILD:-$root/build}
py=${INFERD_PYTHON:-$root/.venv/bin/python}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/bin/test_k_cuda_groupnorm" "$build/bin/test_k_cuda_norm" "$build/bin/test_gpu_plan" "$build/bin/inferd" "$out/bin/"
bash "$root/tests/gpu/bundle_libs.sh" "$out"
tar -C "$out" -cJf "$out/bin.tar.xz" bin lib
rm -rf "${out:?}/lib" "${out:?}/bin"
if [ "${MODELS:-0}" = 1 ]; then
  "$py" "$root/tests/unit/engine/gen_test_models.py" "$out/gpu_plan_models" >/dev/null 2>&1
fi
cp "$root/tests/gpu/device_norm_run.sh" "$out/run.sh"
du -sh "$out"
