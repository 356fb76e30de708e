#!/usr/bin/env bash
# tests/gpu/llm_pydeps.sh: grpcio for the GPU machine's Python (3.12, /opt/torch/.venv, which has no
# gRPC client) as .pydeps/grpcio.tar.xz (git-ignored; 5.5 MiB: carry .pydeps with the device call), so
# tests/gpu/llm_storm.py can stream and cancel over gRPC there too; llm_gpu_bench.sh unpacks it into its
# work folder and puts that on PYTHONPATH.
# Without it the storm's streams all go over HTTP (it says so). grpcio only: the messages are written by
# hand (llm_grpc_wire.py), so no protobuf or tritonclient version can clash with the machine's.
#
#   bash tests/gpu/llm_pydeps.sh [PYVER]       (PYVER default 3.12)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
pyver=${1:-3.12}
py=${INFERD_PYTHON:-$root/.venv/bin/python}
ver=$("$py" -c 'import grpc; print(grpc.__version__)' 2>/dev/null || echo 1.76.0)  # the version CI's client uses
rm -rf "$root/.pydeps"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip install --quiet --target "$tmp" --no-deps --only-binary=:all: \
  --python-version "$pyver" --implementation cp --platform manylinux2014_x86_64 "grpcio==$ver"
mkdir -p "$root/.pydeps"
tar -C "$tmp" -cJf "$root/.pydeps/grpcio.tar.xz" grpc $(cd "$tmp" && ls -d grpcio-*.dist-info)
ls -la "$root/.pydeps/grpcio.tar.xz"
