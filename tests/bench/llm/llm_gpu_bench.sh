#!/usr/bin/env bash
# tests/bench/llm/llm_gpu_bench.sh: issue 35's GPU figures side by side in ONE run (llm_gpu_bench.py says
# which and how): the one-stream and batch-64 decode steps against their bandwidth bounds, 256 concurrent
# streams (512 in, 256 out) through inferd over gRPC and HTTP timed per token by `inferd-load generate`,
# transformers' best batched generate() on the same GPU, the cancellation storm on a full KV pool
# (tests/gpu/llm_storm.py) and bench_llm_decode (the runner alone), as one markdown table.
#
#   tests/bench/llm/llm_gpu_bench.sh BINDIR [WORKDIR]
#
# BINDIR: the CUDA build's `inferd`, `inferd-load` and `bench_llm_decode` (tests/gpu/pack_bindir.sh), their
# libraries installed or in BINDIR/lib. WORKDIR (default: a new /tmp folder) gets the ~2.5 GB checkpoint
# (kept and reused), the repositories and the servers' logs. PYTHON (default /opt/torch/.venv/bin/python):
# torch with CUDA and transformers (setup: tests/gpu/llm_env.sh). grpcio for the storm's gRPC half: from
# .pydeps/grpcio.tar.xz (tests/gpu/llm_pydeps.sh) when that is here, else PYTHON's own, else the storm
# goes over HTTP alone and says so. Every part has a time limit and the whole is killed at 440 s (one
# device call of 8 minutes); the table prints whatever finished. Exit 0 when the served throughput was
# measured and the storm passed.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
LLM_ENV_NAME=llm_gpu_bench . "$ROOT/tests/gpu/llm_env.sh" "$@"
[ -x "$BINDIR/inferd-load" ] || { echo "BINDIR lacks inferd-load (tests/gpu/pack_bindir.sh copies it)" >&2; exit 2; }
if [ -f "$ROOT/.pydeps/grpcio.tar.xz" ]; then
  mkdir -p "$WORK/pydeps" && tar -C "$WORK/pydeps" -xJf "$ROOT/.pydeps/grpcio.tar.xz" &&
    export PYTHONPATH="$WORK/pydeps${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PY" -c 'import grpc; print("grpcio", grpc.__version__)' 2>/dev/null || echo "no grpcio: the storm streams over HTTP alone"
timeout -k 10 440 "$PY" "$HERE/llm_gpu_bench.py" --bin "$BINDIR" --work "$WORK" --budget 420
rc=$?
[ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "(killed at 440 s: the figures above are what finished)"
exit $rc
