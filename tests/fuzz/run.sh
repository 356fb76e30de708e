#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS] [TARGET...]: builds the libFuzzer drivers
# (clang, ASan + UBSan: the 'fuzz' preset, ./build-fuzz) and runs each
# TARGET (default: all) for SECONDS (default 60), starting from its seeds in
# tests/fuzz/corpus/<name>/ (every seed is replayed first, so the committed
# regression inputs are checked on every run). New inputs go to
# build-fuzz/fuzz/<name>/corpus, never into the repository; a crash, leak,
# UB report, timeout (10 s) or out-of-memory (2 GB) fails the script, with
# the input left in build-fuzz/fuzz/<name>/ and its path printed.
# FUZZ_NO_BUILD=1 skips the build; FUZZ_JOBS (default 1) runs that many targets at once.
# The issue's long runs: FUZZ_RUNS=10000000 with SECONDS 1800 stops each driver at 10 million executions or
# 30 minutes, whichever comes first (tests/bench/RESULTS.md records them).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_pbtxt fuzz_graph fuzz_infer fuzz_http fuzz_shm fuzz_stream fuzz_rest fuzz_llm fuzz_tok fuzz_chat fuzz_gen_sse fuzz_openai)
bdir="$root/build-fuzz"
py=${INFERD_PYTHON:-$root/.venv/bin/python}
[ -x "$py" ] || py=python3
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
  (cd "$root" && cmake --preset fuzz -DINFERD_PYTHON="$py" >/dev/null && \
   cmake --build build-fuzz -j"${FUZZ_BUILD_JOBS:-2}" --target "${targets[@]}" >/dev/null) || {
    echo "fuzz: build failed (cmake --preset fuzz && cmake --build build-fuzz)" >&2; exit 2; }
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/lsan.supp:print_suppressions=0}
run_one() {
  local t=$1 name=${1#fuzz_}
  local work="$bdir/fuzz/$name"
  mkdir -p "$work/corpus"
  local log="$work/log.txt"
  "$bdir/bin/$t" -max_total_time="$secs" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/corpus" "$root/tests/fuzz/corpus/$name" >"$log" 2>&1
  local rc=$?
  local stats
  stats=$(grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$log" | tr -s ' \n' ' ')
  local cov
  cov=$(grep -Eo "cov: [0-9]+ ft: [0-9]+" "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    echo "fuzz: $t FAILED (rc $rc); log $log"
    # the driver's own reason (fail() in the drivers prints "fuzz_<name>: why" before it aborts, which
    # libFuzzer reports only as a deadly signal), a library's assertion, and the input itself, so a CI
    # log alone is enough to replay it (base64 -d > crash; build-fuzz/bin/$t crash)
    grep -E "ERROR:|runtime error|SUMMARY|Test unit written|^fuzz_[a-z]+:|[Aa]ssert|Check failed" "$log" | head -12
    local unit
    unit=$(grep -Eo "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
    if [ -n "$unit" ] && [ -f "$unit" ] && [ "$(stat -c %s "$unit")" -le 16384 ]; then
      echo "fuzz: $t input ($(stat -c %s "$unit") bytes), base64:"
      base64 -w 120 "$unit"
    fi
    return 1
  fi
  echo "fuzz: $t ok, ${secs}s${FUZZ_RUNS:+ or $FUZZ_RUNS runs}: $cov $stats"
}
fail=0
jobs=${FUZZ_JOBS:-1}
pids=()
for t in "${targets[@]}"; do
  if [ "$jobs" -gt 1 ]; then
    run_one "$t" & pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}" || fail=1; pids=("${pids[@]:1}"); fi
  else
    run_one "$t" || fail=1
  fi
done
for p in "${pids[@]}"; do wait "$p" || fail=1; done
exit $fail
