"""inferd-load's generate mode (clients/load/gen*.c) against the real server serving tiny random checkpoints
(backend inferd_llm, tests/llm/llm_ckpt.py): over gRPC ModelStreamInfer (TensorRT-LLM's tensors) and HTTP
generate_stream (SSE), closed loop and Poisson arrivals, streamed and not.

What must hold: every request completes and is counted once (requests == N, TTFT and E2E counts == N, the
server's own success count grows by N); with no end token in the checkpoint the outputs run to their drawn
lengths, so the output tokens equal the sum of the lengths drawn (recomputed here from the seed with an
independent port of the draws) and the prompt tokens the sum of the prompt lengths; a context cap makes
every output short and says so; requests the server refuses are counted by kind, not crashed on (exit 0); the
JSON report holds every field. OpenAI's /v1/completions: against the server when it has the endpoint (GET
/v1/models; skipped, saying so, until then), and always against a stand-in that speaks OpenAI's documented
streaming wire format (SSE chunks, usage with stream_options.include_usage, data: [DONE], error objects), which
also checks the request body inferd-load sends.
"""

import http.server
import json
import os
import signal
import socketserver
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
import tritonclient.grpc as grpcclient

import inferd_testlib as lib
from test_load import load_bin

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "llm"))
import llm_ckpt  # noqa: E402

FIXTURES = os.path.join(lib.REPO_ROOT, "tests", "llm", "fixtures")
TOK = os.path.join(lib.REPO_ROOT, "tests", "llm", "tok", "fixtures", "gpt2")
VOCAB = 256

REPORT_KEYS = {"mode", "api", "model", "streaming", "request_rate", "concurrency", "prompt_len", "output_len", "seed",
               "ignore_eos", "requests", "completed", "failed", "short_outputs", "duration_s", "request_throughput",
               "output_tokens_per_s", "total_tokens_per_s", "prompt_tokens", "prompt_tokens_estimated",
               "output_tokens", "requested_output_tokens", "errors_by_kind", "first_error", "ttft_ms", "itl_ms",
               "tpot_ms", "e2e_ms", "lag_ms"}
LAT_KEYS = {"count", "mean", "p50", "p90", "p99", "max"}


# --- the workload's draws, ported from clients/load/rng.c and gen_dist.c

M64 = (1 << 64) - 1


def splitmix(state):
    """(new state, value) of ld_rng_next."""
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def req_seed(seed, i, stream):
    s = seed ^ 0x6A09E667F3BCC909
    s, z = splitmix(s)
    s = z ^ ((i * 0x9E3779B97F4A7C15) & M64)
    s, z = splitmix(s)
    s = z ^ ((stream * 0xBB67AE8584CAA73B) & M64)
    _, z = splitmix(s)
    return z


def uniform_lengths(seed, n, prompt, output):
    """[(prompt_len, output_len)] of requests 0..n-1 with uniform:LO:HI prompt and output distributions."""
    out = []
    for i in range(n):
        s = req_seed(seed, i, 0)
        s, z = splitmix(s)
        p = prompt[0] + z % (prompt[1] - prompt[0] + 1)
        s, z = splitmix(s)
        o = output[0] + z % (output[1] - output[0] + 1)
        out.append((p, o))
    return out


# --- the server

def add_model(repo, name, fx, params, tokenizer=False):
    d = os.path.join(repo, name)
    llm_ckpt.write_checkpoint(fx, os.path.join(d, "1"))
    if tokenizer:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(TOK, f)) as src, open(os.path.join(d, "1", f), "w") as dst:
                dst.write(src.read())
    text = 'backend: "inferd_llm"\nmax_batch_size: 0\n'
    for k, v in params.items():
        text += 'parameters { key: "%s" value { string_value: "%s" } }\n' % (k, v)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(text)


def no_eos(name):
    """A fixture whose checkpoint names no end token: every output runs to the length asked."""
    with open(os.path.join(FIXTURES, name + ".json")) as f:
        fx = json.load(f)
    fx["config"] = {k: v for k, v in fx["config"].items() if k != "eos_token_id"}
    fx["generation_config"] = None
    return fx


def text_fixture():
    """gpt2 with GPT-2's tokenizer and its 50257-token vocabulary, no end token: for OpenAI's text prompts."""
    fx = no_eos("gpt2")
    old, new = fx["config"]["vocab_size"], 50257
    fx["config"]["vocab_size"] = new
    emb = ("wte.weight", "embed_tokens.weight", "lm_head.weight")  # the vocabulary is their first dim
    fx["tensors"] = [[n, [new] + s[1:] if n.endswith(emb) and s[0] == old else s] for n, s in fx["tensors"]]
    return fx


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("gen_repo"))
    add_model(d, "tiny", no_eos("llama3_gqa"), {"kv_block_tokens": 4, "kv_cache_blocks": 128})
    # prompt + output capped at 24 positions: a 16-token prompt gets 8 tokens whatever it asks
    add_model(d, "tiny_ctx", no_eos("llama3_gqa"), {"kv_block_tokens": 4, "kv_cache_blocks": 64, "max_model_len": 24})
    add_model(d, "tiny_text", text_fixture(), {"kv_block_tokens": 4, "kv_cache_blocks": 64}, tokenizer=True)
    # max_batch_size > 0, as TensorRT-LLM's configs have it: every tensor takes a leading 1
    add_model(d, "tiny_batched", no_eos("llama3_gqa"), {"kv_block_tokens": 4, "kv_cache_blocks": 64})
    p = os.path.join(d, "tiny_batched", "config.pbtxt")
    with open(p) as f:
        text = f.read()
    with open(p, "w") as f:
        f.write(text.replace("max_batch_size: 0", "max_batch_size: 8"))
    yield from lib.served(d, ["--strict-readiness", "false"])


def run_gen(*args, timeout=120):
    b = load_bin()
    if not os.access(b, os.X_OK):
        pytest.fail("inferd-load not found or not executable: %s (set INFERD_LOAD_BIN)" % b, pytrace=False)
    p = subprocess.run([b, "generate"] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    bad = [l for l in p.stderr.splitlines() if any(m in l for m in lib.SANITIZER_MARKERS)]
    assert not bad, "inferd-load sanitizer report:\n%s" % p.stderr
    return p


def explain(p):
    return "exit %d\nstdout:\n%s\nstderr:\n%s" % (p.returncode, p.stdout, p.stderr)


def report(tmp_path, *args):
    path = str(tmp_path / "gen.json")
    p = run_gen(*args, "--json", path)
    assert p.returncode == 0, explain(p)
    with open(path) as f:
        runs = json.load(f)
    assert isinstance(runs, list) and len(runs) == 1, runs
    r = runs[0]
    assert set(r) == REPORT_KEYS, set(r) ^ REPORT_KEYS
    for k in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "lag_ms"):
        assert set(r[k]) == LAT_KEYS, (k, r[k])
    assert "TTFT" in p.stdout and "output tok/s" in p.stdout, p.stdout
    return r


def success_count(srv, model):
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    try:
        st = c.get_inference_statistics(model, as_json=True)
        return sum(int(m["inference_stats"]["success"].get("count", 0)) for m in st["model_stats"])
    finally:
        c.close()


def check_counts(r, n, lens, streamed=True):
    want_out = sum(o for _, o in lens)
    assert r["requests"] == n and r["completed"] == n and r["failed"] == 0, r
    assert r["errors_by_kind"] == {} and r["first_error"] is None, r
    assert r["output_tokens"] == want_out and r["requested_output_tokens"] == want_out, r
    assert r["prompt_tokens"] == sum(p for p, _ in lens), r
    assert r["short_outputs"] == 0, r
    assert r["ttft_ms"]["count"] == n and r["e2e_ms"]["count"] == n, r
    assert 0 < r["ttft_ms"]["p50"] <= r["e2e_ms"]["p50"], r
    assert r["ttft_ms"]["p50"] <= r["ttft_ms"]["p90"] <= r["ttft_ms"]["p99"] <= r["ttft_ms"]["max"], r
    if streamed:
        # every token after a request's first chunk is one inter-token gap
        assert 0 < r["itl_ms"]["count"] <= want_out - n, r
        assert r["tpot_ms"]["count"] == n, r  # every output is over one token
    else:
        assert r["itl_ms"]["count"] == 0 and r["tpot_ms"]["count"] == 0, r
    assert r["duration_s"] > 0
    assert r["output_tokens_per_s"] == pytest.approx(want_out / r["duration_s"], rel=1e-3)
    assert r["total_tokens_per_s"] == pytest.approx((want_out + r["prompt_tokens"]) / r["duration_s"], rel=1e-3)
    assert r["request_throughput"] == pytest.approx(n / r["duration_s"], rel=1e-3)


LENS = ["--prompt-len", "uniform:4:12", "--output-len", "uniform:4:10"]


@pytest.mark.parametrize("api", ["grpc", "http"])
def test_closed_loop_counts(srv, tmp_path, api):
    n, seed = 16, 7
    url = srv.grpc_url if api == "grpc" else srv.http_url
    before = success_count(srv, "tiny")
    r = report(tmp_path, "--api", api, "-u", url, "-m", "tiny", "--vocab-size", VOCAB, "--num-requests", n,
               "--concurrency", 4, "--seed", seed, *LENS)
    check_counts(r, n, uniform_lengths(seed, n, (4, 12), (4, 10)))
    assert r["mode"] == "generate" and r["api"] == api and r["streaming"] is True and r["concurrency"] == 4
    assert r["lag_ms"]["count"] == 0  # no schedule in a closed loop
    assert success_count(srv, "tiny") - before == n


@pytest.mark.parametrize("api", ["grpc", "http"])
def test_batched_model(srv, tmp_path, api):
    n, seed = 6, 2
    url = srv.grpc_url if api == "grpc" else srv.http_url
    r = report(tmp_path, "--api", api, "-u", url, "-m", "tiny_batched", "--vocab-size", VOCAB, "--num-requests", n,
               "--concurrency", 3, "--seed", seed, *LENS)
    check_counts(r, n, uniform_lengths(seed, n, (4, 12), (4, 10)))


def test_ctrl_c_ends_the_run_with_a_report(srv, tmp_path):
    path = str(tmp_path / "gen.json")
    before = success_count(srv, "tiny")
    p = subprocess.Popen([load_bin(), "generate", "-u", srv.grpc_url, "-m", "tiny", "--vocab-size", str(VOCAB),
                          "--duration-s", "60", "--request-rate", "20", "--output-len", "4", "--json", path],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t_end = time.monotonic() + 30
        while success_count(srv, "tiny") - before < 3:  # the load is running
            assert time.monotonic() < t_end and p.poll() is None, "no request completed"
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, (out, err)
    assert not [l for l in err.splitlines() if any(m in l for m in lib.SANITIZER_MARKERS)], err
    with open(path) as f:
        r = json.load(f)[0]
    # every request sent finished (none was cut off), and the server counted each
    assert r["requests"] >= 3 and r["completed"] == r["requests"] and r["failed"] == 0, r
    assert r["output_tokens"] == 4 * r["requests"], r
    assert success_count(srv, "tiny") - before == r["requests"]
    assert "TTFT" in out


@pytest.mark.parametrize("api", ["grpc", "http"])
def test_poisson_arrivals(srv, tmp_path, api):
    n, seed = 12, 3
    url = srv.grpc_url if api == "grpc" else srv.http_url
    ckpt = os.path.join(str(tmp_path), "ckpt")
    os.makedirs(ckpt)
    with open(os.path.join(ckpt, "config.json"), "w") as f:
        json.dump({"vocab_size": VOCAB}, f)
    r = report(tmp_path, "--api", api, "-u", url, "-m", "tiny", "--model-config", ckpt, "--num-requests", n,
               "--request-rate", 200, "--concurrency", 8, "--seed", seed, *LENS)
    check_counts(r, n, uniform_lengths(seed, n, (4, 12), (4, 10)))
    assert r["request_rate"] == 200 and r["lag_ms"]["count"] == n, r


@pytest.mark.parametrize("api", ["grpc", "http"])
def test_not_streamed(srv, tmp_path, api):
    n = 6
    url = srv.grpc_url if api == "grpc" else srv.http_url
    r = report(tmp_path, "--api", api, "-u", url, "-m", "tiny", "--vocab-size", VOCAB, "--num-requests", n,
               "--concurrency", 2, "--no-stream", "--prompt-len", 8, "--output-len", 12)
    check_counts(r, n, [(8, 12)] * n, streamed=False)
    assert r["streaming"] is False


@pytest.mark.parametrize("api", ["grpc", "http"])
def test_context_cap_makes_outputs_short(srv, tmp_path, api):
    n = 5
    url = srv.grpc_url if api == "grpc" else srv.http_url
    r = report(tmp_path, "--api", api, "-u", url, "-m", "tiny_ctx", "--vocab-size", VOCAB, "--num-requests", n,
               "--prompt-len", 16, "--output-len", 16)
    assert r["completed"] == n and r["failed"] == 0, r
    assert r["output_tokens"] == n * 8 and r["requested_output_tokens"] == n * 16, r
    assert r["short_outputs"] == n, r


@pytest.mark.parametrize("api", ["grpc", "http"])
def test_refused_requests_are_counted(srv, tmp_path, api):
    n = 7
    url = srv.grpc_url if api == "grpc" else srv.http_url
    # ids drawn from a vocabulary larger than the model's: the server refuses nearly every prompt
    r = report(tmp_path, "--api", api, "-u", url, "-m", "tiny", "--vocab-size", 1000000, "--num-requests", n,
               "--concurrency", 3, "--prompt-len", 8)
    assert r["requests"] == n and r["failed"] == n and r["completed"] == 0, r
    assert sum(r["errors_by_kind"].values()) == n, r
    assert "outside the model's vocabulary" in r["first_error"], r
    if api == "http":
        assert r["errors_by_kind"] == {"HTTP_400": n}, r
    assert r["ttft_ms"]["count"] == 0 and r["output_tokens"] == 0, r
    # an unknown model: the same on HTTP; on gRPC the model is described first, and that fails the run
    p = run_gen("--api", api, "-u", url, "-m", "nope", "--vocab-size", VOCAB, "--num-requests", 2)
    if api == "grpc":
        assert p.returncode == 1 and "nope" in p.stderr, explain(p)
    else:
        assert p.returncode == 0 and "HTTP_404: 2" in p.stdout and "unknown model" in p.stdout, explain(p)


def test_duration(srv, tmp_path):
    r = report(tmp_path, "-u", srv.grpc_url, "-m", "tiny", "--vocab-size", VOCAB, "--duration-s", "0.5",
               "--request-rate", 40, "--output-len", 4, "--prompt-len", 4)
    assert 1 <= r["requests"] <= 60 and r["completed"] == r["requests"], r
    assert r["output_tokens"] == 4 * r["requests"], r


def test_usage_errors_and_unreachable(srv):
    p = run_gen("-m", "tiny")
    assert p.returncode == 2 and "--vocab-size" in p.stderr, explain(p)
    p = run_gen("-m", "tiny", "--vocab-size", 9, "--output-len", "normal:5")
    assert p.returncode == 2 and "--output-len" in p.stderr, explain(p)
    p = run_gen("--help")
    assert p.returncode == 0 and "--request-rate" in p.stdout
    # nothing listens there
    with socketserver.TCPServer(("127.0.0.1", 0), None) as s:
        port = s.server_address[1]
    p = run_gen("--api", "http", "-u", "127.0.0.1:%d" % port, "-m", "tiny", "--vocab-size", 9, "--num-requests", 2)
    assert p.returncode == 1 and "no request reached the server" in p.stderr, explain(p)


# --- OpenAI /v1/completions

def has_openai(srv):
    try:
        with urllib.request.urlopen(srv.http_url + "/v1/models", timeout=10) as resp:
            return resp.status == 200
    except (urllib.error.HTTPError, urllib.error.URLError):
        return False


def test_openai_completions_on_the_server(srv, tmp_path):
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    try:
        assert c.is_model_ready("tiny_text")  # the checkpoint with a tokenizer loads, endpoint or not
    finally:
        c.close()
    if not has_openai(srv):
        pytest.skip("server has no OpenAI endpoint yet (GET /v1/models is not 200)")
    n, seed = 6, 5
    # no --ignore-eos: inferd refuses fields OpenAI does not have, as OpenAI does (vLLM takes it)
    r = report(tmp_path, "--api", "openai", "-u", srv.http_url, "-m", "tiny_text", "--num-requests", n,
               "--concurrency", 4, "--seed", seed, *LENS)
    lens = uniform_lengths(seed, n, (4, 12), (4, 10))
    assert r["completed"] == n and r["failed"] == 0, r
    # no end token in the checkpoint: every output runs to max_tokens (usage counts them)
    assert r["output_tokens"] == sum(o for _, o in lens), r
    assert r["prompt_tokens"] > 0 and r["prompt_tokens_estimated"] is False, r
    assert r["ttft_ms"]["count"] == n and r["e2e_ms"]["count"] == n, r
    # a chunk per piece of text: a random model's tokens may decode to no text until later, so a request can
    # come as one chunk (no gap to time)
    assert r["tpot_ms"]["count"] <= n and r["itl_ms"]["count"] <= r["output_tokens"] - n, r


class OpenAIStandIn(http.server.BaseHTTPRequestHandler):
    """OpenAI's documented /v1/completions wire format, as the stand-in for a server: one SSE chunk per token
    ({"choices": [{"text": ...}]}), then with stream_options.include_usage a chunk with empty choices and the
    usage, then data: [DONE]; stream false: one completion object. A model named "refuse" gets OpenAI's error
    object with status 404, one named "stall" no answer for 1.5 s. Every request body is kept for the test to check."""
    protocol_version = "HTTP/1.1"
    bodies = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        OpenAIStandIn.bodies.append(body)
        assert self.path == "/v1/completions", self.path
        if body["model"] == "stall":  # answers nothing for longer than the client waits
            time.sleep(1.5)
            return
        if body["model"] == "refuse":
            data = json.dumps({"error": {"message": "The model `refuse` does not exist.",
                                         "type": "invalid_request_error", "code": "model_not_found"}}).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        n, prompt = body["max_tokens"], len(body["prompt"].split())
        usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
        base = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": body["model"]}
        if not body.get("stream"):
            data = json.dumps(dict(base, choices=[{"index": 0, "text": " tok" * n, "logprobs": None,
                                                   "finish_reason": "length"}], usage=usage)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(text):
            b = text.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            self.wfile.flush()

        with_usage = body.get("stream_options", {}).get("include_usage")
        for i in range(n):
            c = dict(base, choices=[{"index": 0, "text": " tok", "logprobs": None,
                                     "finish_reason": "length" if i == n - 1 else None}])
            if with_usage:
                c["usage"] = None
            chunk("data: %s\n\n" % json.dumps(c))
        if with_usage:
            chunk("data: %s\n\n" % json.dumps(dict(base, choices=[], usage=usage)))
        chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def stand_in():
    OpenAIStandIn.bodies = []
    s = socketserver.ThreadingTCPServer(("127.0.0.1", 0), OpenAIStandIn)
    s.daemon_threads = True
    t = threading.Thread(target=s.serve_forever, daemon=True)
    t.start()
    yield "127.0.0.1:%d" % s.server_address[1]
    s.shutdown()
    s.server_close()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no_stream"])
def test_openai_wire_format(stand_in, tmp_path, stream):
    n, seed = 10, 11
    r = report(tmp_path, "--api", "openai", "-u", stand_in, "-m", "gpt", "--num-requests", n, "--concurrency", 3,
               "--seed", seed, "--ignore-eos", *LENS, *([] if stream else ["--no-stream"]))
    lens = uniform_lengths(seed, n, (4, 12), (4, 10))
    assert r["completed"] == n and r["failed"] == 0, r
    assert r["output_tokens"] == sum(o for _, o in lens), r
    assert r["prompt_tokens"] == sum(p for p, _ in lens) and r["prompt_tokens_estimated"] is False, r
    assert r["ttft_ms"]["count"] == n, r
    assert r["itl_ms"]["count"] == (sum(o for _, o in lens) - n if stream else 0), r
    bodies = sorted(OpenAIStandIn.bodies, key=lambda b: b["prompt"])
    assert len(bodies) == n
    assert sorted(b["max_tokens"] for b in bodies) == sorted(o for _, o in lens)
    assert sorted(len(b["prompt"].split()) for b in bodies) == sorted(p for p, _ in lens)
    for b in bodies:
        assert b["model"] == "gpt" and b["stream"] is stream and b["ignore_eos"] is True, b
        assert b["temperature"] == 0, b
        assert ("stream_options" in b) is stream and (not stream or b["stream_options"] == {"include_usage": True})


def test_openai_wire_errors(stand_in, tmp_path):
    r = report(tmp_path, "--api", "openai", "-u", stand_in, "-m", "refuse", "--num-requests", 4, "--concurrency", 2)
    assert r["failed"] == 4 and r["errors_by_kind"] == {"HTTP_404": 4}, r
    assert "does not exist" in r["first_error"], r


def test_openai_wire_timeout(stand_in, tmp_path):
    r = report(tmp_path, "--api", "openai", "-u", stand_in, "-m", "stall", "--num-requests", 2, "--concurrency", 2,
               "--timeout-ms", 200)
    assert r["failed"] == 2 and r["errors_by_kind"] == {"DEADLINE_EXCEEDED": 2}, r
    assert r["duration_s"] < 1.5, r  # given up at the deadline, not at the answer
