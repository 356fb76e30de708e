#!/usr/bin/env bash
# From a fresh clone: install dependencies, build, generate the example model
# repository (./example_repo, the seed 1024-512-10 MLP) and serve it on
# gRPC port 8001 and HTTP port 8000 until Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash deploy/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
.venv/bin/python tests/models/gen_models.py --out example_repo --set example
exec build/bin/inferd --model-repository example_repo --grpc-port "${GRPC_PORT:-8001}" --http-port "${HTTP_PORT:-8000}" "$@"
