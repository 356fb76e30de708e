#!/usr/bin/env bash
# Issue 33 on the GPU machine: Triton's two CUDA shared-memory client examples
# (simple_grpc_cudashm_client.py, simple_http_cudashm_client.py, vendored in
# tests/triton_examples/vendor/) run unmodified against a CUDA build of inferd.
#   here:   bash tests/gpu/triton_cudashm.sh --bundle DIR   # the client wheels the GPU machine lacks, into DIR
#   device: bash tests/gpu/triton_cudashm.sh INFERD_BIN DIR  # installs them (no index) and runs the two
# The device's venv (/opt/torch/.venv: numpy, pillow, onnx) runs the harness and the examples; the
# wheels (tritonclient with its gRPC and HTTP clients, cuda-python's bindings, which tritonclient's
# cuda_shared_memory module needs) go to DIR/site on PYTHONPATH. Exit: run_examples.py's.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = --bundle ]; then
  dir=${2:?usage: triton_cudashm.sh --bundle DIR}
  mkdir -p "$dir/wheels"
  # numpy, pillow and protobuf's peers come from the device's venv; only what it lacks travels
  "${PIP:-$root/.venv/bin/pip}" download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$dir/wheels" tritonclient grpcio protobuf python-rapidjson geventhttpclient gevent greenlet \
    zope.event zope.interface brotli certifi urllib3 aiohttp aiosignal aiohappyeyeballs frozenlist multidict \
    propcache yarl idna attrs cuda-python cuda-bindings cuda-pathfinder attrdict six
  du -sh "$dir/wheels"
  exit 0
fi
bin=${1:?usage: triton_cudashm.sh INFERD_BIN DIR}
dir=${2:?usage: triton_cudashm.sh INFERD_BIN DIR}
py=${PY:-/opt/torch/.venv/bin/python}
"$py" -m pip install -q --no-index --no-deps --target "$dir/site" "$dir"/wheels/*.whl
export PYTHONPATH="$dir/site${PYTHONPATH:+:$PYTHONPATH}"
"$py" -c "import tritonclient.grpc, tritonclient.http, tritonclient.utils.cuda_shared_memory as c; print('cuda shm client ok')"
INFERD_BIN=$bin exec "$py" "$root/tests/triton_examples/run_examples.py" --verbose \
  simple_grpc_cudashm_client.py simple_http_cudashm_client.py
