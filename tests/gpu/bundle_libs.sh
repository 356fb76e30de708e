#!/usr/bin/env bash
# Shared step of the device bundles (device_bundle*.sh, tests/bench/vision/bundle.sh):
# copies into DIR/lib every shared library the binaries in DIR/bin load, except
# the C runtime and the CUDA, cuBLAS and cuDNN libraries the GPU machine has
# itself, and strips debug info from both (a device call carries at most 64 MiB).
#   bash tests/gpu/bundle_libs.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir/lib"
for b in "$dir"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u \
  | grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|libcuda|libcudart|libcublas|libcudnn|libnvrtc|libnvJitLink' \
  | while read -r lib; do cp -L "$lib" "$dir/lib/"; done
strip --strip-debug "$dir"/bin/* "$dir"/lib/* 2>/dev/null || true
