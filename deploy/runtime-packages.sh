#!/bin/sh
# runtime-packages.sh BINARY...: the Debian/Ubuntu packages that provide the
# shared libraries BINARY links (as ldd resolves them), one per line, sorted.
# The container builds run it in their build stage and install exactly that
# list in the runtime stage, so the runtime image carries the libraries the
# binary needs (libgrpc, libprotobuf-c, libuv, libopenblas, libhttp-parser,
# libdnnl, and what those pull in) without compilers or -dev packages, on whichever
# release the image is based on (Debian 12's libgrpc29, Ubuntu 24.04's
# libgrpc29t64, ...).
# Libraries under /usr/local (the CUDA toolkit in nvidia/cuda images, which
# the matching runtime image already has) are left out; so are libraries that
# no package owns (reported on stderr). A library ldd cannot find is an error.
set -eu
[ $# -ge 1 ] || { echo "usage: runtime-packages.sh BINARY..." >&2; exit 2; }
libs=""
for b in "$@"; do
  [ -e "$b" ] || { echo "runtime-packages.sh: no such file: $b" >&2; exit 2; }
  out=$(ldd "$b") || { echo "runtime-packages.sh: ldd failed on $b" >&2; exit 2; }
  if printf '%s\n' "$out" | grep -q 'not found'; then
    printf '%s\n' "$out" | grep 'not found' >&2
    echo "runtime-packages.sh: $b has unresolved libraries" >&2
    exit 2
  fi
  libs="$libs $(printf '%s\n' "$out" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')"
done
for lib in $libs; do
  case "$lib" in /usr/local/*) continue ;; esac
  real=$(readlink -f "$lib")
  pkg=""
  # dpkg records the path a package shipped: try it as ldd printed it, resolved, and both
  # halves of the merged-/usr layout (/lib -> /usr/lib).
  for p in "$lib" "$real" "/usr$lib" "/usr$real" "${lib#/usr}" "${real#/usr}"; do
    pkg=$(dpkg -S "$p" 2>/dev/null | head -n1 | cut -d: -f1) && [ -n "$pkg" ] && break
  done
  if [ -z "$pkg" ]; then
    echo "runtime-packages.sh: no package owns $lib (left out)" >&2
    continue
  fi
  echo "$pkg"
done | sort -u
