#!/bin/sh
# Container entrypoint: turns environment variables into inferd flags and
# exec's inferd, so the server itself is PID 1 and receives the SIGTERM of
# `docker stop` / Kubernetes directly (it drains: answers what is in flight,
# then exits 0; --exit-timeout-secs bounds that).
#
#   INFERD_MODEL_REPOSITORY  model repository              (default /models)
#   INFERD_GRPC_PORT         gRPC port                     (default 8001)
#   INFERD_HTTP_PORT         HTTP port: health, /metrics   (default 8000)
#   INFERD_EXTRA_ARGS        more flags, split on spaces   (e.g. "--exit-timeout-secs 30 --log-level debug")
#   INFERD_BIN               the server binary             (default /usr/local/bin/inferd)
# Arguments given to the container (docker run IMAGE ARGS..., Kubernetes
# `args:`) are appended after INFERD_EXTRA_ARGS.
set -eu
bin=${INFERD_BIN:-/usr/local/bin/inferd}
repo=${INFERD_MODEL_REPOSITORY:-/models}
grpc_port=${INFERD_GRPC_PORT:-8001}
http_port=${INFERD_HTTP_PORT:-8000}
extra=${INFERD_EXTRA_ARGS:-}

fail() { echo "entrypoint: $*" >&2; exit 2; }
case "$grpc_port" in ''|*[!0-9]*) fail "INFERD_GRPC_PORT must be a port number, got '$grpc_port'" ;; esac
case "$http_port" in ''|*[!0-9]*) fail "INFERD_HTTP_PORT must be a port number, got '$http_port'" ;; esac
[ -x "$bin" ] || fail "inferd binary not found or not executable: $bin (INFERD_BIN)"
[ -d "$repo" ] || fail "model repository $repo is not a directory: mount one (docker run -v \$PWD/example_repo:/models:ro ...) or set INFERD_MODEL_REPOSITORY"

# INFERD_EXTRA_ARGS is split on whitespace on purpose (no globbing); flags whose
# values contain spaces go in the container's arguments instead.
set -f
# shellcheck disable=SC2086
exec "$bin" --model-repository "$repo" --grpc-port "$grpc_port" --http-port "$http_port" $extra "$@"
