#!/usr/bin/env bash
# Gathers what one GPU-machine call of tests/bench/multigpu/run.sh needs into .devrun-mg/ (git-ignored; carry
# it): inferd and inferd-load from ./build (or BUILD), nginx (the balancer; NGINX, default the one on PATH, or
# Debian's package unpacked: `apt-get download nginx && dpkg -x nginx_*.deb DIR`), and the non-CUDA shared
# libraries they load, as one lib.tar.xz. The models are written on the machine (repo.py). Then, there:
#   bash tests/bench/multigpu/run.sh .devrun-mg "$OUT/mg"
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=$root/.devrun-mg
build=${BUILD:-$root/build}
nginx=${NGINX:-$(command -v nginx || true)}
rm -rf "$out"
mkdir -p "$out/bin"
cp "$build/bin/inferd" "$build/bin/inferd-load" "$out/bin/"
if [ -n "$nginx" ]; then cp "$nginx" "$out/bin/nginx"; else echo "bundle.sh: no nginx: run.sh will skip the balancer part" >&2; fi
strip --strip-debug "$out"/bin/*
bash "$root/tests/gpu/bundle_libs.sh" "$out"
tar -C "$out" -cJf "$out/lib.tar.xz" lib
rm -rf "${out:?}/lib"
du -sh "$out"
