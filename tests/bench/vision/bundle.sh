#!/usr/bin/env bash
# Gathers what one GPU-machine call needs for the vision checks and benchmark
# into .devrun-vision/ (git-ignored; at most 64 MiB travel): the GPU tests,
# bench_engine, the server, the non-CUDA shared libraries they load (one
# lib.tar.xz), and the models gen_test_models.py writes. The zoo graphs and
# the Python scripts travel with the tree. Run there:
#   bash tests/bench/vision/run.sh .devrun-vision tests|bench
# Builds nothing: run after `cmake --build --preset default` (sm_90, cuDNN found).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=$root/.devrun-vision
build=${BUILD:-$root/build}
py=${INFERD_PYTHON:-$root/.venv/bin/python}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build"/bin/test_cuda_* "$build"/bin/test_k_cuda_* "$build/bin/test_gpu_plan" "$build/bin/bench_engine" \
  "$build/bin/inferd" "$build/bin/inferd-load" "$out/bin/"
strip --strip-debug "$out"/bin/*  # symbols stay for backtraces; 64 MiB travel in all
bash "$root/tests/gpu/bundle_libs.sh" "$out"
tar -C "$out" -cJf "$out/lib.tar.xz" lib
rm -rf "${out:?}/lib"
"$py" "$root/tests/unit/engine/gen_test_models.py" "$out/gpu_plan_models" >/dev/null 2>&1
du -sh "$out"
