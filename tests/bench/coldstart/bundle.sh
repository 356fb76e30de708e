#!/usr/bin/env bash
# Gathers what one GPU-machine call needs for the cold-start benchmark into
# .devrun-coldstart/ (git-ignored; at most 64 MiB travel): the server, the
# load generator and the non-CUDA shared libraries they load (one
# lib.tar.xz). The model is exported there with torch (run.sh). Run there,
# from the repository root:
#   bash tests/bench/coldstart/run.sh .devrun-coldstart
# Builds nothing: run after `cmake --build --preset default` (sm_90, cuDNN found).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=$root/.devrun-coldstart
build=${BUILD:-$root/build}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/bin/inferd" "$build/bin/inferd-load" "$out/bin/"
bash "$root/tests/gpu/bundle_libs.sh" "$out"
tar -C "$out" -cJf "$out/lib.tar.xz" lib
rm -rf "${out:?}/lib"
du -sh "$out"
