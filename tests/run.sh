#!/usr/bin/env bash
# The whole test suite, as CI runs it (after .ci/run installed what it needs):
#   1. build (default preset), C unit tests with ctest, pytest integration suite
#      against the real server;
#   2. the same under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the libFuzzer drivers (tests/fuzz/run.sh, 60 s each);
#   4. the threaded code under ThreadSanitizer (unit tests and the server).
# GPU tests skip, saying so, where no GPU is visible.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py=${INFERD_PYTHON:-$root/.venv/bin/python}
jobs=${INFERD_JOBS:-$(nproc)}

step() { printf '\n=== %s\n' "$*"; }

# The headless-Chromium checks (inferd-tune's report, the dashboard) fail here, rather than skip, when
# chromium, chromedriver or selenium is missing: deploy/install-deps.sh installs them, and CI runs this file.
export INFERD_REQUIRE_BROWSER=${INFERD_REQUIRE_BROWSER:-1}

run_preset() {
  local preset=$1
  step "configure + build ($preset)"
  cmake --preset "$preset" -DINFERD_PYTHON="$py" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  step "unit tests ($preset)"
  ctest --preset "$preset" -j "$jobs" ${2:+-R "$2"}
}

run_integration() {
  local bin=$1
  step "integration tests against $bin"
  INFERD_BIN="$bin" "$py" -m pytest -q -x -p no:cacheprovider tests/integration
}

run_preset default
run_integration "$root/build/bin/inferd"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp print_suppressions=0"
run_preset asan
run_integration "$root/build-asan/bin/inferd"
unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS

# Coverage-guided fuzzing (clang, libFuzzer, ASan + UBSan; tests/fuzz/):
# every committed seed and regression input is replayed, then each driver
# mutates for INFERD_FUZZ_SECS (60 s each, 9 drivers, $jobs at a time:
# about 5 minutes of CI on 2 cores plus the clang build). Any crash, leak,
# UB or OOM fails.
step "fuzz drivers (${INFERD_FUZZ_SECS:-60} s each)"
INFERD_PYTHON="$py" FUZZ_JOBS="$jobs" FUZZ_BUILD_JOBS="$jobs" bash tests/fuzz/run.sh "${INFERD_FUZZ_SECS:-60}"

# Threaded code under ThreadSanitizer: the gRPC front end, the HTTP
# endpoint, the batcher's unit tests, one tokenizer shared by four threads,
# then the real server (loop thread, batcher, CQ and instance threads)
# under the concurrency, batching, inference and shutdown tests. Debian's
# gRPC is not instrumented: its internals are suppressed, our code is not.
export TSAN_OPTIONS="halt_on_error=1 suppressions=$root/tests/unit/server/grpc_tsan.supp"
run_preset tsan 'test_(grpc_front|grpc_accept|grpc_tls|http|batcher|batcher_random|shm|trace|tls|replyq|copypool)$|^llm_tokenizer_threads$'
step "integration tests against the ThreadSanitizer build"
# One OpenMP thread: libgomp is not instrumented, so TSan cannot see the
# barrier that ends a parallel region and reports the instance thread reading
# what libgomp's workers wrote (engine/cpu/par.c splitting a 1.5M-element Relu,
# test_lifecycle's 6 MB answers). Serial, the same code runs on the thread TSan
# watches.
OMP_NUM_THREADS=1 INFERD_BIN="$root/build-tsan/bin/inferd" "$py" -m pytest -q -x -p no:cacheprovider \
  tests/integration/test_concurrency.py tests/integration/test_infer.py tests/integration/test_lifecycle.py \
  tests/integration/test_shm.py tests/integration/test_stream.py tests/integration/test_log_settings.py \
  tests/integration/test_seqpad.py tests/integration/test_sequence.py tests/integration/test_model_control.py \
  tests/integration/test_warmup_limits.py tests/integration/test_ensemble.py tests/integration/test_decoupled.py \
  tests/integration/test_llm_serve.py tests/integration/test_llm_storm.py tests/integration/test_load_generate.py \
  tests/integration/test_openai.py \
  tests/integration/test_rest.py \
  tests/integration/test_tls.py tests/integration/test_grpc_tls_front.py tests/integration/test_rapid_reset.py \
  tests/integration/test_instance_spin.py tests/integration/test_prepare.py \
  tests/integration/test_stream_flow.py tests/integration/test_grpc_fds.py tests/integration/test_latency_target.py \
  $(ls tests/integration/test_batching.py 2>/dev/null)

step "all tests passed"
