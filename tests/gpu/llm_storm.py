"""tests/gpu/llm_storm.py: no generative request lost or cut short under a cancellation storm and a full KV
pool (issue 35's done-when). Many concurrent greedy streams on a model whose KV pool is far too small for
all of them at once (kv_cache_blocks), half over gRPC ModelStreamInfer (grpcio, llm_grpc_wire.py) and half
over HTTP generate_stream (SSE), a fraction of them cancelled at random points (gRPC: the stream's cancel;
HTTP: the client closes its connection; either right after sending, before any token, or after k tokens).
Then each request again alone (unary HTTP /generate, one at a time) as the reference. What must hold:

  - every request not cancelled ends with its final response, no error, and exactly its request_output_len
    tokens (fewer only when the last is one of the model's end tokens), token for token equal to its
    alone run (on a mismatch with torch at hand: transformers' FP32 logits there tell a near-tie, which
    floating-point order may flip, from a wrong token; a near-tie is reported, not failed);
  - every cancelled request's tokens are a prefix of its alone run;
  - the pool really was full: inferd_llm_preemptions_total grew during the storm;
  - afterwards inferd_llm_kv_blocks_used, running and waiting sequences go back to 0, and the server is
    alive and answers a new request.

Two ways to run it:
  - on a GPU (run by tests/bench/llm/llm_gpu_bench.py, or alone):
      python tests/gpu/llm_storm.py --bin BINDIR --work DIR [--kind KIND_GPU] [--json FILE]
    saves a random FP32 Llama (hidden 512, 4 layers, vocab 2048) with transformers and serves it;
  - in CI on the CPU (tests/integration/test_llm_storm.py): storm() against a server the test started on a
    tiny fixture checkpoint.
Exit status: 0 every check passed, 1 one failed, 2 setup.
"""
import argparse
import http.client
import json
import os
import random
import socket
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llm_grpc_wire as W  # noqa: E402


class Plan:
    """The workload: n requests, prompt and output lengths uniform in their ranges, cancel_frac of them
    cancelled at a random point, the first half sent at once and the rest spread over stagger_s."""

    def __init__(self, n=96, prompt=(16, 200), out=(32, 200), cancel_frac=0.35, stagger_s=1.0, vocab=2048,
                 seed=11, eos=(), use_grpc=True):
        self.n, self.prompt, self.out, self.cancel_frac, self.stagger_s = n, prompt, out, cancel_frac, stagger_s
        self.vocab, self.seed, self.eos, self.use_grpc = vocab, seed, set(eos), use_grpc

    def requests(self):
        rng = random.Random(self.seed)
        rs = []
        for i in range(self.n):
            pl, ol = rng.randint(*self.prompt), rng.randint(*self.out)
            r = {"i": i, "ids": [rng.randrange(self.vocab) for _ in range(pl)], "out": ol,
                 "api": "grpc" if (self.use_grpc and i % 2 == 0) else "http",
                 "delay": 0.0 if i < self.n // 2 else rng.uniform(0, self.stagger_s), "cancel_after": None}
            if rng.random() < self.cancel_frac:
                r["cancel_after"] = rng.randint(0, max(0, ol - 2))  # 0: right after sending, before any token
            rs.append(r)
        return rs


# --- HTTP

def http_stream(port, model, ids, out_len, cancel_after=None, timeout=600):
    """POST generate_stream; with cancel_after k the client closes its connection once it has k tokens
    (k 0: right after sending). Returns dict(tokens, final, error, cancelled)."""
    res = {"tokens": [], "final": False, "error": None, "cancelled": False}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def hang_up():
        res["cancelled"] = True
        try:
            conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        conn.close()

    try:
        conn.request("POST", "/v2/models/%s/generate_stream" % model,
                     json.dumps({"input_ids": ids, "request_output_len": out_len}),
                     {"Content-Type": "application/json"})
        if cancel_after == 0:
            hang_up()
            return res
        r = conn.getresponse()
        if r.status != 200:
            res["error"] = "HTTP %d: %s" % (r.status, r.read()[:300])
            return res
        buf = b""
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                ev = ev.strip()
                if not ev.startswith(b"data: "):
                    continue
                j = json.loads(ev[6:])
                if "error" in j:
                    res["error"] = str(j["error"])
                    return res
                res["tokens"] += j.get("output_ids", [])
                if cancel_after is not None and len(res["tokens"]) >= cancel_after:
                    hang_up()
                    return res
        res["final"] = True  # the server ends the event stream after the last token
        return res
    except (OSError, http.client.HTTPException, ValueError) as e:
        if not res["cancelled"]:
            res["error"] = repr(e)
        return res
    finally:
        conn.close()


def http_generate(port, model, ids, out_len, timeout=600):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v2/models/%s/generate" % model,
                     json.dumps({"input_ids": ids, "request_output_len": out_len}),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        body = r.read().decode()
        if r.status != 200:
            raise RuntimeError("alone run: HTTP %d: %s" % (r.status, body[:300]))
        return json.loads(body)["output_ids"]
    finally:
        conn.close()


def metric(port, name, model):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and ('model="%s"' % model) in line:
            total += float(line.rsplit(None, 1)[1])
    return total


def await_metric(port, name, model, pred, timeout):
    t_end = time.monotonic() + timeout
    while True:
        v = metric(port, name, model)
        if pred(v) or time.monotonic() > t_end:
            return v
        time.sleep(0.02)  # a gauge has no push notice: poll it


def ready(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/v2/health/ready" % port, timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


# --- the storm

def storm(http_port, grpc_target, model, plan, alive=lambda: True, log=print, tie_check=None, timeout=300):
    """Runs plan against the server; returns (checks, summary): checks a list of (name, ok, detail)."""
    reqs = plan.requests()
    grpc = W.GrpcGen(grpc_target) if plan.use_grpc else None
    res = [None] * len(reqs)
    p0 = metric(http_port, "inferd_llm_preemptions_total", model)

    def one(r):
        time.sleep(r["delay"])
        k = r["cancel_after"]
        try:
            if r["api"] == "grpc":
                res[r["i"]] = grpc.stream(model, "s%d" % r["i"], r["ids"], r["out"], cancel_at_once=k == 0,
                                          on_tokens=(lambda t: len(t) >= k) if k else None, timeout=timeout)
            else:
                res[r["i"]] = http_stream(http_port, model, r["ids"], r["out"], cancel_after=k, timeout=timeout)
        except Exception as e:  # noqa: BLE001 (a client failure is a lost request: reported below)
            res[r["i"]] = {"tokens": [], "final": False, "error": "client: %r" % e, "cancelled": False}

    t0 = time.monotonic()
    th = [threading.Thread(target=one, args=(r,), daemon=True) for r in reqs]
    for t in th:
        t.start()
    for t in th:
        t.join(max(0.1, t0 + timeout - time.monotonic()))
    wall = time.monotonic() - t0
    if grpc:
        grpc.close()
    preempt = metric(http_port, "inferd_llm_preemptions_total", model) - p0
    gauges = {g: await_metric(http_port, g, model, lambda v: v == 0, 30)
              for g in ("inferd_llm_kv_blocks_used", "inferd_llm_running_sequences", "inferd_llm_waiting_sequences")}
    t1 = time.monotonic()
    refs = [http_generate(http_port, model, r["ids"], r["out"]) for r in reqs]
    ref_s = time.monotonic() - t1

    checks = []
    lost, wrong, ties, cut, bad_prefix = [], [], [], [], []
    n_cancel = {"grpc": 0, "http": 0}
    done_tokens = 0
    for r, got, ref in zip(reqs, res, refs):
        tag = "request %d (%s, prompt %d, out %d)" % (r["i"], r["api"], len(r["ids"]), r["out"])
        if got is None:
            lost.append(tag + ": no answer within %d s" % timeout)
            continue
        if got["cancelled"]:
            n_cancel[r["api"]] += 1
            if got["tokens"] != ref[:len(got["tokens"])]:
                bad_prefix.append(tag + ": its %d tokens are not a prefix of its alone run" % len(got["tokens"]))
            continue
        if got["error"] or not got["final"]:
            lost.append("%s: %s" % (tag, got["error"] or "no final response"))
            continue
        toks = got["tokens"]
        done_tokens += len(toks)
        if len(toks) != r["out"] and not (len(toks) < r["out"] and toks and toks[-1] in plan.eos):
            cut.append("%s: %d tokens, last %s" % (tag, len(toks), toks[-1:]))
        if toks != ref:
            pos = next((k for k in range(min(len(toks), len(ref))) if toks[k] != ref[k]), min(len(toks), len(ref)))
            why = tie_check(r["ids"] + ref[:pos], ref[pos] if pos < len(ref) else None,
                            toks[pos] if pos < len(toks) else None) if tie_check else None
            msg = "%s: differs from its alone run at token %d (%s vs %s)%s" % (
                tag, pos, toks[pos:pos + 3], ref[pos:pos + 3], "; " + why[1] if why else "")
            (ties if why and why[0] else wrong).append(msg)
    n_done = sum(1 for g in res if g and not g["cancelled"])  # the lost among them
    n_ok = n_done - len([x for x in lost if "no answer" not in x])
    checks.append(("no request lost", not lost, "%d finished, %d cancelled (%d gRPC, %d HTTP), lost %d%s" % (
        n_done, n_cancel["grpc"] + n_cancel["http"], n_cancel["grpc"], n_cancel["http"], len(lost),
        ": " + "; ".join(lost[:5]) if lost else "")))
    checks.append(("none cut short", not cut, "%d finished with their full length (or an end token)%s" % (
        n_ok - len(cut), ": " + "; ".join(cut[:5]) if cut else "")))
    checks.append(("tokens equal alone", not wrong, "%d of %d finished requests equal their alone run%s%s" % (
        n_ok - len(wrong) - len(ties), n_ok,
        "; near-ties (not failed): " + "; ".join(ties[:3]) if ties else "",
        "; " + "; ".join(wrong[:5]) if wrong else "")))
    checks.append(("cancelled are prefixes", not bad_prefix, "%d cancelled%s" % (
        n_cancel["grpc"] + n_cancel["http"], ": " + "; ".join(bad_prefix[:5]) if bad_prefix else "")))
    checks.append(("pool full: preemptions", preempt > 0, "%d preemptions during the storm" % preempt))
    checks.append(("KV blocks back to 0", all(v == 0 for v in gauges.values()),
                   ", ".join("%s %g" % (k.replace("inferd_llm_", ""), v) for k, v in gauges.items())))
    after = None
    try:
        after = http_generate(http_port, model, reqs[0]["ids"], 4) if alive() and ready(http_port) else None
    except Exception as e:  # noqa: BLE001
        log("  request after the storm: %r" % e)
    checks.append(("server alive", after is not None and after == refs[0][:len(after)],
                   "alive %s, ready and answering: %s" % (alive(), after is not None)))
    summary = {"requests": len(reqs), "finished": n_done, "cancelled_grpc": n_cancel["grpc"],
               "cancelled_http": n_cancel["http"], "lost": len(lost), "cut": len(cut), "wrong": len(wrong),
               "near_ties": len(ties), "preemptions": preempt, "storm_s": wall, "alone_s": ref_s,
               "tokens_finished": done_tokens, "passed": all(ok for _, ok, _ in checks)}
    return checks, summary


# --- standalone (GPU)

def torch_tie_check(ckpt):
    """A check for a mismatch at the end of prefix: transformers' FP32 logits there; a near-tie when the
    two tokens' logits differ by at most 1e-4 of the largest logit's magnitude. The model is loaded at the
    first mismatch (none: no torch start-up in the storm's time)."""
    m = []

    def check(prefix, a, b):
        if a is None or b is None:
            return (False, "lengths differ")
        try:
            import torch
            import transformers as tf
            if not m:
                m.append(tf.AutoModelForCausalLM.from_pretrained(ckpt).float().to("cuda").eval())
            with torch.no_grad():
                lg = m[0](torch.tensor([prefix], device="cuda")).logits[0, -1].float()
        except Exception as e:  # noqa: BLE001 (only a diagnosis: the mismatch stays a failure)
            return (False, "no near-tie check: %r" % e)
        gap, top = abs(float(lg[a] - lg[b])), float(lg.abs().max())
        return (gap <= 1e-4 * top, "logits there %.6g vs %.6g (gap %.2e of the largest %.3g)"
                % (float(lg[a]), float(lg[b]), gap / top, top))
    return check


def main():
    import llm_gpu_util as U
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--kind", default="KIND_GPU")
    ap.add_argument("--n", type=int, default=96)
    ap.add_argument("--blocks", type=int, default=96, help="kv_cache_blocks of 16 tokens")
    ap.add_argument("--json")
    ap.add_argument("--fixture", action="store_true",
                    help="no torch: tests/llm's tiny Llama fixture (numpy) on a pool of 40 blocks of 4 tokens, "
                         "48 streams (a check of this script on the CPU)")
    a = ap.parse_args()
    if not W.have_grpc():
        U.log("SKIP gRPC half: no grpcio for %s (PYTHONPATH to a folder holding it, e.g. tests/gpu/llm_pydeps.sh's);"
              " every stream goes over HTTP" % sys.executable)
    repo = os.path.join(a.work, "storm_repo")
    ck = os.path.join(repo, "storm", "1")
    params = {"max_model_len": "512", "max_num_seqs": "64", "max_num_batched_tokens": "2048",
              "kv_block_tokens": "16", "kv_cache_blocks": str(a.blocks)}
    plan = Plan(n=a.n, vocab=2048, use_grpc=W.have_grpc())
    if a.fixture:
        sys.path.insert(0, os.path.join(HERE, "..", "llm"))
        import llm_ckpt
        with open(os.path.join(HERE, "..", "llm", "fixtures", "llama3_gqa.json")) as f:
            fx = json.load(f)
        if not os.path.exists(os.path.join(ck, "model.safetensors")):
            llm_ckpt.write_checkpoint(fx, ck)
        a.blocks = 40
        params = {"max_model_len": "128", "max_num_seqs": "16", "max_num_batched_tokens": "64",
                  "kv_block_tokens": "4", "kv_cache_blocks": "40"}
        plan = Plan(n=48, prompt=(4, 40), out=(8, 60), stagger_s=0.3, vocab=fx["config"]["vocab_size"],
                    eos=[fx["config"]["eos_token_id"]], use_grpc=W.have_grpc())
    elif not os.path.exists(os.path.join(ck, "model.safetensors")):
        cfg = U.tiny_config("llama", vocab=2048, hidden=512, layers=4, heads=8, kv_heads=2, inter=1408, max_pos=2048)
        U.save_model(cfg, ck, seed=7, dtype="float32", device="cuda" if a.kind == "KIND_GPU" else "cpu")
    U.write_config(os.path.join(repo, "storm"), params, gpus=(0,) if a.kind == "KIND_GPU" else (), kind=a.kind)
    srv = U.Server(os.path.join(a.bin, "inferd"), repo, os.path.join(a.work, "storm_inferd.log"))
    rc = 1
    try:
        srv.start(timeout=120)
        srv.wait_models(["storm"], timeout=120)
        tie = torch_tie_check(ck) if a.kind == "KIND_GPU" and not a.fixture else None
        checks, summary = storm(srv.port, "127.0.0.1:%d" % srv.grpc_port, "storm", plan,
                                alive=lambda: srv.proc.poll() is None, log=U.log, tie_check=tie)
        for name, ok, detail in checks:
            U.log("%s storm: %s: %s" % ("PASS" if ok else "FAIL", name, detail))
        summary["grpc"] = plan.use_grpc
        summary["kv_blocks"] = a.blocks
        U.log("storm summary: %s" % json.dumps(summary))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(summary, f)
        rc = 0 if summary["passed"] else 1
    except Exception as e:  # noqa: BLE001
        U.log("FAIL storm: setup: %r\ninferd log tail:\n%s" % (e, srv.tail()))
        rc = 2
    finally:
        code = srv.stop()
        U.log("storm server exit code after SIGTERM: %s" % code)
        if code not in (0, None):
            rc = rc or 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
