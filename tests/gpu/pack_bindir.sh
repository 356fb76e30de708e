#!/usr/bin/env bash
# tests/gpu/pack_bindir.sh: a BINDIR for tests/gpu/llm_serve_gpu.sh and tests/bench/llm/llm_gpu_bench.sh
# from a CUDA build: the binaries, and in OUT/lib the shared libraries they load that a bare GPU machine
# may lack (ldd's answers here, without glibc's own and the CUDA driver's; the CUDA toolkit's own
# libraries (cuBLAS, cuBLASLt, cuDNN, ...: hundreds of MiB) only with CUDA_LIBS=1, else their names are
# printed: the GPU machine's CUDA or torch installation (site-packages/nvidia/*/lib) may provide them,
# the same major version, on LD_LIBRARY_PATH). Debug info is stripped from the copies, and with XZ=1 OUT/lib
# becomes OUT/lib.tar.xz (a device call carries at most 64 MiB; tests/gpu/llm_env.sh and run_all.sh unpack it
# there); with XZ=all the binaries and lib/ become one OUT/bundle.tar.xz (unpacked there by hand first).
#
#   tests/gpu/pack_bindir.sh OUT [BUILD_DIR]      (BUILD_DIR default: build)
#   BINS="test_k_cuda_arg test_gpu_plan" XZ=1 tests/gpu/pack_bindir.sh OUT   (only those; then on the GPU
#   machine: bash tests/gpu/run_all.sh OUT)
set -eu
OUT="${1:?usage: $0 OUT [BUILD_DIR]}"
B="${2:-build}"
mkdir -p "$OUT/lib"
# the LLM scripts' binaries, and the GPU checks of the index and selection ops (ArgMax, TopK, Scatter,
# Expand/Tile/Slice kernels; test_gpu_plan for their plan paths), which tests/gpu/run_all.sh OUT runs there
# (BINS="a b ..." packs those instead)
bins=${BINS:-inferd inferd-load test_k_cuda_llm test_k_cuda_sample test_k_cuda_groupnorm test_gpu_llm_step bench_llm_decode
  test_k_cuda_arg test_k_cuda_scatter test_k_cuda_index test_k_cuda_xf test_gpu_plan}
for x in $bins; do
  if [ -x "$B/bin/$x" ]; then cp "$B/bin/$x" "$OUT/"; else echo "not built: $B/bin/$x"; fi
done
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libcuda\.so|libnvidia)'
for x in "$OUT"/inferd "$OUT"/inferd-load "$OUT"/test_* "$OUT"/bench_*; do
  [ -x "$x" ] || continue
  ldd "$x" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    echo "$name" | grep -Eq "$skip" && continue
    [ -e "$OUT/lib/$name" ] && continue
    size=$(stat -Lc %s "$path")
    if echo "$name" | grep -Eq '^lib(cublas|cudnn|cufft|curand|cusolver|cusparse|nvrtc|nvJitLink)' &&
      [ "${CUDA_LIBS:-0}" != 1 ]; then
      echo "left out (the CUDA toolkit's; CUDA_LIBS=1 copies it): $name ($((size >> 20)) MiB, $path)"
      continue
    fi
    cp -L "$path" "$OUT/lib/$name"
  done
done
strip --strip-debug "$OUT"/inferd* "$OUT"/test_* "$OUT"/bench_* "$OUT"/lib/* 2>/dev/null || true
if [ "${XZ:-0}" = all ]; then
  # everything in one archive (a device call carries 64 MiB with the tree): unpack it there first,
  # `tar -C OUT -xJf OUT/bundle.tar.xz`, then run as with XZ=0
  rm -f "$OUT/bundle.tar.xz"
  names=$(cd "$OUT" && find . -mindepth 1 -maxdepth 1 -printf '%P\n')  # listed before the archive exists
  echo "$names" | XZ_OPT="-3 -T2" tar -C "$OUT" -cJf "$OUT/bundle.tar.xz" --remove-files -T -
elif [ "${XZ:-0}" = 1 ]; then
  tar -C "$OUT" -cJf "$OUT/lib.tar.xz" lib
  rm -rf "${OUT:?}/lib"
fi
du -sh "$OUT"
