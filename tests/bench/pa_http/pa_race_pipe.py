"""Issue 14: perf_analyzer 2.50's --request-count race, made certain without a debugger.

perf_analyzer (src/inference_profiler.cc, src/concurrency_manager.cc; unchanged up to its Dec 2025 head)
  1. starts its worker threads, which begin sending at once (ConcurrencyManager::ChangeConcurrencyLevel),
  2. prints "Request concurrency: N" (std::cout << ... << std::endl),
  3. ProfileHelper throws away every request record collected so far (SwapRequestRecords with an empty vector),
  4. Measure sleeps in 1 s steps until CountCollectedRequests() >= --request-count.
With --request-count the workers stop after sending exactly that many, so a request that completed before
step 3 is never counted and step 4 never ends. Between 1 and 3 the main thread runs only microseconds, but a
2-core machine under load can preempt it for milliseconds while 64 new workers get answers.

Here the window is held open from outside: perf_analyzer's stdout is a pipe with room for exactly what it
prints before step 2, so its main thread blocks in step 2's write while the workers run. Once the server has
counted every request the pipe is drained. --hold 0 drains at once (the control): perf_analyzer finishes.
With --hold it never finishes, over HTTP and gRPC alike: the server answered everything and the records
were thrown away on the client. Prints one line per run: finished/stalled, server successes, time.

  python tests/bench/pa_http/pa_race_pipe.py --url 127.0.0.1:PORT --grpc-url 127.0.0.1:PORT -i http [--hold]
"""

import argparse
import fcntl
import os
import subprocess
import sys
import threading
import time

PAGE = 4096
PIPE_SIZE = 16 * PAGE  # Linux's default pipe: 16 page slots; a write that fits in the last page merges into it


def successes(grpc_url):
    import tritonclient.grpc as grpcclient
    with grpcclient.InferenceServerClient(url=grpc_url) as c:
        return c.get_inference_statistics("mlp", "1").model_stats[0].inference_stats.success.count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="the endpoint perf_analyzer drives")
    ap.add_argument("--grpc-url", required=True, help="for the server's success count")
    ap.add_argument("-i", dest="protocol", default="http")
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--hold", action="store_true", help="hold the main thread until the server counted all")
    ap.add_argument("--pa", default="/work/main/.venv/bin/perf_analyzer")
    ap.add_argument("--timeout", type=float, default=30.0)
    a = ap.parse_args()
    c = a.concurrency
    cmd = [a.pa, "-m", "mlp", "-u", a.url, "-i", a.protocol, "--concurrency-range", "%d:%d" % (c, c),
           "--request-count", str(a.requests)]
    # what perf_analyzer prints before "Request concurrency: N" (checked against its output below)
    prefix = ("*** Measurement Settings ***\n  Batch size: 1\n  Service Kind: TRITON\n  Sending %d benchmark requests\n"
              "  Latency limit: 0 msec\n  Concurrency limit: %d concurrent requests\n"
              "  Using synchronous calls for inference\n\n" % (a.requests, c))
    r, w = os.pipe()
    if a.hold:
        fcntl.fcntl(w, 1031, PIPE_SIZE)  # F_SETPIPE_SZ
        fl = fcntl.fcntl(w, fcntl.F_GETFL)
        fcntl.fcntl(w, fcntl.F_SETFL, fl | os.O_NONBLOCK)
        os.write(w, b"#" * (PIPE_SIZE - len(prefix)))  # 15 full pages, and the last one has len(prefix) free
        fcntl.fcntl(w, fcntl.F_SETFL, fl)
    before = successes(a.grpc_url)
    t0 = time.monotonic()
    pa = subprocess.Popen(cmd, stdout=w, stderr=subprocess.DEVNULL)
    os.close(w)
    got = []
    if a.hold:
        deadline = time.monotonic() + a.timeout
        while successes(a.grpc_url) - before < a.requests and time.monotonic() < deadline and pa.poll() is None:
            time.sleep(0.05)
        held = successes(a.grpc_url) - before
        assert pa.poll() is None, "perf_analyzer exited while held"
        filler = os.read(r, PIPE_SIZE - len(prefix))
        while len(filler) < PIPE_SIZE - len(prefix):
            filler += os.read(r, PIPE_SIZE - len(prefix) - len(filler))
    else:
        held = None
    drain = threading.Thread(target=lambda: got.extend(iter(lambda: os.read(r, 65536), b"")), daemon=True)
    drain.start()
    try:
        pa.wait(a.timeout)
        state = "finished rc %d" % pa.returncode
    except subprocess.TimeoutExpired:
        state = "stalled (killed after %.0f s)" % a.timeout
        pa.kill()
        pa.wait()
    drain.join(5)
    out = b"".join(got).decode(errors="replace")
    assert out.startswith(prefix + "Request concurrency: %d\n" % c), "perf_analyzer printed other text:\n" + out[:600]
    print("%s, %s: %s; server successes %d (%s while held), %.1f s" % (
        a.protocol, "held" if a.hold else "not held", state, successes(a.grpc_url) - before,
        held if held is not None else "-", time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
