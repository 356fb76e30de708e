#!/usr/bin/env bash
# Gathers Triton's perf_analyzer (tritonclient 2.50.0's binary, deploy/install-perf-analyzer.sh) for the GPU
# machine, whose Ubuntu 24.04 has neither libb64 nor CUDA 12's runtime:
#   DEST/pa.tar.xz   bin/perf_analyzer and lib/ (every library it loads except the C/C++ runtime and libcuda,
#                    libcudart.so.12 included: the binary was built against CUDA 12, and driver 580 runs it)
# DEST should be git-ignored (.devrun-pa/ is) and travels with the device call. There,
# tests/gpu/perf_analyzer_gpu.sh unpacks it itself when given PA_BUNDLE=DEST.
#   bash tests/gpu/bundle_pa.sh DEST
# Env: PA_BIN (the perf_analyzer executable, not the venv's wrapper script; default: perf_analyzer.bin beside
# the perf_analyzer found in ./.venv/bin, then on PATH).
set -euo pipefail
dest=${1:?usage: bundle_pa.sh DEST}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pa=${PA_BIN:-}
if [ -z "$pa" ]; then
  for w in "$root/.venv/bin/perf_analyzer" "$(command -v perf_analyzer || true)"; do
    [ -n "$w" ] && [ -x "$w.bin" ] && { pa=$w.bin; break; }
  done
fi
if [ -z "$pa" ] || [ ! -x "$pa" ]; then
  echo "no perf_analyzer binary (bash deploy/install-perf-analyzer.sh, or PA_BIN)" >&2
  exit 1
fi
# its libcudart.so.12 is the venv's nvidia-cuda-runtime-cu12 (the installer's wrapper points there)
cudart=$(find "$(dirname "$pa")"/../lib -path '*/nvidia/cuda_runtime/lib/libcudart.so.12' 2>/dev/null | head -n 1)
[ -n "$cudart" ] || { echo "no libcudart.so.12 in $pa's venv (pip install nvidia-cuda-runtime-cu12)" >&2; exit 1; }
LD_LIBRARY_PATH=$(dirname "$cudart")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
if ldd "$pa" | grep -q 'not found'; then
  ldd "$pa" | grep 'not found' >&2
  exit 1
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin"
cp -L "$pa" "$stage/bin/perf_analyzer"
# the shared step of the device bundles: every non-system library into lib/, debug info stripped
bash "$here/bundle_libs.sh" "$stage"
# ... except the CUDA runtime, which bundle_libs.sh leaves to the GPU machine's toolkit (CUDA 13 there)
cp -L "$cudart" "$stage/lib/"
if LD_LIBRARY_PATH=$stage/lib ldd "$stage/bin/perf_analyzer" | grep -v -E 'libcuda\.so' | grep -q 'not found'; then
  echo "the bundle misses a library:" >&2
  LD_LIBRARY_PATH=$stage/lib ldd "$stage/bin/perf_analyzer" >&2
  exit 1
fi
mkdir -p "$dest"
rm -f "$dest/pa.tar.xz"
tar -C "$stage" -cf - bin lib | xz -T0 -6 >"$dest/pa.tar.xz"
LD_LIBRARY_PATH=$stage/lib "$stage/bin/perf_analyzer" --version 2>&1 | head -1 || true
ls "$stage/lib"
du -sh "$dest/pa.tar.xz"
