#!/usr/bin/env bash
# tests/bench/qdq/device_bundle.sh: what the GPU machine needs to check QDQ models on GPU
# instances (issue 34 item 4), gathered into one folder (argument; default .devrun-qdq): the
# server and test_k_cuda_quant (the Q/DQ kernels against their C references), the shared
# libraries they load but the machine's CUDA and cuDNN (lib.tar.xz: a device call carries at
# most 64 MiB), and run.sh (device_run.sh). The models are built on the machine by
# device_qdq.py from the working tree. Builds nothing: run it after
# `cmake --build --preset default` (CUDA on, sm_90), or set BUILD to another build folder.
# The device call, from the repository root:
#   bash .devrun-qdq/run.sh .devrun-qdq        (carry: .devrun-qdq)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$root/.devrun-qdq}
build=${BUILD:-$root/build}
rm -rf "$out"
mkdir -p "$out/bin"
cp "$build/bin/inferd" "$build/bin/test_k_cuda_quant" "$out/bin/"
bash "$root/tests/gpu/bundle_libs.sh" "$out"
tar -C "$out" -cJf "$out/lib.tar.xz" lib
rm -rf "${out:?}/lib"
cp "$root/tests/bench/qdq/device_run.sh" "$out/run.sh"
du -sh "$out"
