# pa_serve.sh: what the perf_analyzer device scripts (tests/gpu/perf_analyzer_gpu.sh, tests/gpu/pa_hang_probe.sh)
# share: finding perf_analyzer, the seed MLP's repository, and inferd serving it. Sourced, not run, after
# script_args and script_python (tests/script_args.sh):
#   pa_find            PA (perf_analyzer) and PA_LD (its LD_LIBRARY_PATH) from PA, PA_BUNDLE or PATH, as the
#                      callers' headers describe; exits 2 when it does not run
#   pa_repo DIR VARIANT  the model simplenet as anchor_repo.py's VARIANT under DIR; MREPO is its repository
#   pa_serve MREPO LOG   inferd (BIN/inferd, INFERD_ARGS) on two free ports with client shared memory allowed;
#                      sets GRPC, HTTP, PID and METRICS; waits until the model answers its readiness route and
#                      exits 2 if the server exits first or is not ready in 300 s; pa_stop ends it (also at exit)
# shellcheck shell=bash
# shellcheck disable=SC2034  # MREPO, GRPC, HTTP, PID, METRICS and PA_LD are for the caller

PA_SERVE_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# VARIANT from KIND (KIND_GPU: the seed MLP fp16 on 2 GPU instances; KIND_CPU: fp32 on 2 CPU instances) unless
# set; exits 2 on another KIND.
pa_variant() {
  KIND=${KIND:-KIND_GPU}
  case $KIND in
    KIND_GPU) VARIANT=${VARIANT:-gpu:fp16:500:2} ;;
    KIND_CPU) VARIANT=${VARIANT:-cpu:fp32:500:2} ;;
    *) echo "KIND is KIND_GPU or KIND_CPU, not $KIND" >&2; exit 2 ;;
  esac
}

pa_find() {
  PA_LD=${LD_LIBRARY_PATH:-}
  if [ -n "${PA_BUNDLE:-}" ]; then
    PA_BUNDLE=$(cd "$PA_BUNDLE" && pwd)
    if [ ! -x "$PA_BUNDLE/bin/perf_analyzer" ]; then tar -C "$PA_BUNDLE" -xJf "$PA_BUNDLE/pa.tar.xz" || exit 2; fi
    PA=${PA:-$PA_BUNDLE/bin/perf_analyzer}
    PA_LD=$PA_BUNDLE/lib${PA_LD:+:$PA_LD}
  fi
  PA=${PA:-$(command -v perf_analyzer || true)}
  if [ -z "$PA" ] || ! LD_LIBRARY_PATH=$PA_LD "$PA" --version >/dev/null 2>&1; then
    echo "perf_analyzer does not run (PA=${PA:-unset}; set PA or PA_BUNDLE):" >&2
    [ -n "$PA" ] && LD_LIBRARY_PATH=$PA_LD "$PA" --version 2>&1 | tail -n 3 >&2
    exit 2
  fi
}

pa_repo() {
  rm -rf "$1"
  "$PYTHON" - "$PA_SERVE_HERE/../bench/serve_gpu" "$1" "$2" <<'PY' || exit 2
import sys
sys.path.insert(0, sys.argv[1])
import anchor_repo
anchor_repo.write_repos(sys.argv[2], [sys.argv[3]])
PY
  MREPO=$1/${2//:/_}
}

pa_free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

pa_stop() { if [ -n "${PID:-}" ]; then kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=""; fi; }

pa_serve() {
  GRPC=$(pa_free_port)
  HTTP=$(pa_free_port)
  # shellcheck disable=SC2086  # INFERD_ARGS: separate flags
  "$BIN/inferd" --model-repository "$1" --grpc-port "$GRPC" --http-port "$HTTP" --allow-client-shm true \
    --exit-timeout-secs 5 --log-level info ${INFERD_ARGS:-} >"$2" 2>&1 &
  PID=$!
  trap pa_stop EXIT
  # ready: the model answers its readiness route (the GPU plan is built at load); give up if the server exits
  "$PYTHON" - "http://127.0.0.1:$HTTP/v2/models/simplenet/ready" "$PID" <<'PY' || { tail -n 20 "$2" >&2; exit 2; }
import sys, time, urllib.request
url, pid = sys.argv[1], int(sys.argv[2])
end = time.monotonic() + 300
while time.monotonic() < end:
    try:
        if urllib.request.urlopen(url, timeout=5).status == 200:
            sys.exit(0)
    except Exception:
        pass
    try:  # exited: gone, or a zombie until this script's shell reaps it
        with open("/proc/%d/stat" % pid) as f:
            gone = f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        gone = True
    if gone:
        sys.exit("inferd exited before the model was ready")
    time.sleep(0.2)
sys.exit("model not ready after 300 s")
PY
  METRICS=http://127.0.0.1:$HTTP/metrics
}
