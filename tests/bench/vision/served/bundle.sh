#!/usr/bin/env bash
# Gathers what one GPU-machine call needs for the served seed-CNN benchmark (run.sh beside this file)
# into .devrun-vision/served/ (git-ignored; carry it): the server, the anchors' loadc and
# kserve_min.desc (built here by shared/anchors/build.sh), and the non-CUDA shared libraries they
# load (one lib.tar.xz). The model is written on the machine itself (fill.py; 400 MB of weights
# would not travel), and peer.py and run.sh travel with the tree. Then, there:
#   bash tests/bench/vision/served/run.sh .devrun-vision/served "$OUT/served"
# The same bundle (lib/ unpacked by run.sh, on LD_LIBRARY_PATH with cuDNN) serves
# tests/models/zoo/camera_gpu_check.py: the UINT8/FP16 camera models on KIND_GPU vs KIND_CPU.
# Builds nothing of inferd: run after `cmake --build --preset default` (CUDA, cuDNN found).
# tests/bench/vision/bundle.sh empties .devrun-vision: run it first when both are needed.
# Env: BUILD (default ./build), ANCHORS (the anchors folder; default shared/anchors of this
# checkout, else /work/shared/anchors).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../../.." && pwd)
out=$root/.devrun-vision/served
build=${BUILD:-$root/build}
anchors=${ANCHORS:-$root/shared/anchors}
[ -d "$anchors" ] || anchors=/work/shared/anchors
rm -rf "$out"
mkdir -p "$out/bin"
cp "$build/bin/inferd" "$out/bin/"
bash "$anchors/build.sh" "$out/anchors" >/dev/null
cp "$out/anchors/loadc" "$out/bin/"
cp "$out/anchors/kserve_min.desc" "$out/"
rm -rf "$out/anchors"
strip --strip-debug "$out"/bin/*  # symbols stay for backtraces; 64 MiB travel in all
bash "$root/tests/gpu/bundle_libs.sh" "$out"
# the vision bundle's libraries serve these binaries too (the same build): one copy travels
if [ -f "$out/../lib.tar.xz" ] && tar -tJf "$out/../lib.tar.xz" | sed 's|^lib/||' | sort >/tmp/served_have.$$ &&
   (cd "$out/lib" && ls) | sort | comm -23 - /tmp/served_have.$$ | grep -q .; then
  tar -C "$out" -cJf "$out/lib.tar.xz" lib  # some library the vision bundle lacks
fi
[ -f "$out/../lib.tar.xz" ] || tar -C "$out" -cJf "$out/lib.tar.xz" lib
rm -f /tmp/served_have.$$
rm -rf "${out:?}/lib"
du -sh "$out"
