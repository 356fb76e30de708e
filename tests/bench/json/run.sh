#!/usr/bin/env bash
# Builds and runs json_bench.c (needs libcjson-dev, libjansson-dev, libjson-c-dev).
# Usage: bash tests/bench/json/run.sh [n_floats]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags="-O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror"
for lib in MAIN CJSON JANSSON JSONC; do
  cc $flags -DBENCH_$lib $(pkg-config --cflags libcjson jansson json-c) -c -o "$out/$lib.o" "$here/json_bench.c"
done
cc -o "$out/json_bench" "$out"/*.o $(pkg-config --libs libcjson jansson json-c)
"$out/json_bench" "${1:-1000000}"
