#!/usr/bin/env bash
# Gathers what one GPU-machine call of issue 32's figures needs into .devrun-i32/ (git-ignored; a device call
# carries 64 MiB in all, the tree ~15 of them): bundle.tar.xz = bin/inferd and bin/inferd-load (debug info
# stripped, symbols kept for backtraces) and lib/, every non-system library they load (tests/gpu/bundle_libs.sh:
# not CUDA, cuBLAS or cuDNN, which the GPU machine has); pa.tar.xz = perf_analyzer and its libraries
# (tests/gpu/bundle_pa.sh; needs deploy/install-perf-analyzer.sh run here first; left out with a warning when it
# cannot be made, and run.sh then leaves perf_analyzer's rows out); commit.txt = the commit built. For pa_echo.sh
# the bundle also holds bin/bench_fixed_server (when built) and anchors/: the shared anchors' loadc, echo_server and
# kserve_min.desc (ANCHORS, default /work/shared/anchors, built with its build.sh; left out with a warning). The models are
# exported there with torch (offline.py). Builds nothing: run after `cmake --build --preset default` with CUDA
# (nvcc found: INFERD_CUDA AUTO), then there, from the repository root:
#   bash tests/bench/issue32/run.sh .devrun-i32
# Env: BUILD (the build folder, default build/), DEST (default .devrun-i32), NO_PA=1 (no perf_analyzer),
#      ALLOW_CPU=1 (accept a server built without CUDA: for the KIND_CPU dry run only).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${DEST:-$root/.devrun-i32}
build=${BUILD:-$root/build}
for f in inferd inferd-load; do [ -x "$build/bin/$f" ] || { echo "no $build/bin/$f: build first" >&2; exit 1; }; done
if ! ldd "$build/bin/inferd" | grep -q libcudart; then
  [ -n "${ALLOW_CPU:-}" ] || { echo "$build/bin/inferd was built without CUDA (ALLOW_CPU=1 for a dry run)" >&2; exit 1; }
  echo "warning: $build/bin/inferd was built without CUDA: good for KIND_CPU only" >&2
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin"
cp "$build/bin/inferd" "$build/bin/inferd-load" "$stage/bin/"
[ -x "$build/bin/bench_fixed_server" ] && cp "$build/bin/bench_fixed_server" "$stage/bin/"
bash "$root/tests/gpu/bundle_libs.sh" "$stage"  # also strips debug info from bin/ and lib/
anchors=${ANCHORS:-/work/shared/anchors}
if [ -f "$anchors/build.sh" ] && bash "$anchors/build.sh" "$stage/anchors" >"$stage/anchors.log" 2>&1; then
  ldd "$stage/anchors/loadc" "$stage/anchors/echo_server" | awk '/=> \// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    while read -r lib; do [ -e "$stage/lib/$(basename "$lib")" ] || cp -L "$lib" "$stage/lib/"; done
  strip --strip-debug "$stage/anchors/loadc" "$stage/anchors/echo_server" "$stage"/lib/* 2>/dev/null || true
else
  echo "warning: no anchors/ in the bundle (pa_echo.sh's seed MLP part is skipped):" >&2
  tail -n 3 "$stage/anchors.log" >&2 2>/dev/null || true
  rm -rf "$stage/anchors"
fi
rm -rf "$out"
mkdir -p "$out"
parts=(bin lib)
[ -d "$stage/anchors" ] && parts+=(anchors)
tar -C "$stage" -cf - "${parts[@]}" | xz -T2 -6 >"$out/bundle.tar.xz"
c=$(git -C "$root" rev-parse --short HEAD)
git -C "$root" diff --quiet HEAD -- . ':!tests/bench/issue32' 2>/dev/null || c="$c (+ uncommitted changes)"
echo "$c" >"$out/commit.txt"
if [ -z "${NO_PA:-}" ]; then
  bash "$root/tests/gpu/bundle_pa.sh" "$out" >"$stage/pa.log" 2>&1 ||
    { echo "warning: no perf_analyzer in the bundle (its rows will be left out):" >&2; tail -n 5 "$stage/pa.log" >&2; }
fi
ls -la "$out"
du -sh "$out"
