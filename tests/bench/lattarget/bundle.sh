#!/usr/bin/env bash
# Gathers what the two GPU-machine calls of issue 37's figures need into .devrun-lat37/ (git-ignored; a call
# carries 64 MiB in all): bundle.tar.xz (bin/inferd, bin/inferd-load and the libraries they load that the device
# lacks: tests/bench/issue32/bundle.sh with NO_PA=1), commit.txt, and wheels/: what inferd-tune and pick.py need
# beyond the device's /opt/torch/.venv (tritonclient for its ModelConfig protos, with grpcio, protobuf 6 and
# python-rapidjson, which its gRPC package imports; ml_dtypes and packaging in wheels/extra), for CPython 3.12; device.sh installs them with pip --no-index
# into a folder on that process's PYTHONPATH only. Builds nothing: run after a CUDA build of the default preset
# (cmake --build --preset default -j2 --target inferd inferd-load). Env: BUILD, DEST (default .devrun-lat37),
# ALLOW_CPU=1 (a build without CUDA: the KIND=cpu rehearsal).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
dest=${DEST:-$root/.devrun-lat37}
DEST=$dest NO_PA=1 bash "$root/tests/bench/issue32/bundle.sh"
mkdir -p "$dest/wheels"
"${PIP:-$root/.venv/bin/pip}" download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$dest/wheels" "tritonclient==$("$root/.venv/bin/python" -c 'import importlib.metadata as m; print(m.version("tritonclient"))')" \
  grpcio "protobuf>=6.30,<7" python-rapidjson
# tritonclient's other imports, which the torch venv has (onnx needs ml_dtypes, transformers packaging): installed
# there only when missing, so the venv's own builds stay in front
mkdir -p "$dest/wheels/extra"
"${PIP:-$root/.venv/bin/pip}" download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$dest/wheels/extra" ml_dtypes packaging
ls -la "$dest" "$dest/wheels"
du -sh "$dest"
