"""tests/bench/llm/llm_gpu_bench.py: issue 35's GPU figures side by side in one run, on a Llama-3.2-1B-shaped
model with random FP16 weights saved by transformers on the device (hidden 2048, 16 layers, 32 heads over 8 KV
heads of 64, MLP 8192, vocab 128256, tied embeddings; default RoPE). Run by llm_gpu_bench.sh, which says how.

Served (inferd on GPU 0, load from `inferd-load generate`, whose TTFT / inter-token / per-output-token times
are taken per token as each streamed response arrives, in C, one connection or stream per request):
 (i)   one stream (prompt 512, 256 tokens, gRPC ModelStreamInfer): the decode step (the time per output token
       after the first, p50 over requests; beside it the inter-token p50 and the server's mean gap) against
       the weight-read bound (weight bytes / the device-to-device copy bandwidth torch measures);
 (iii) 64 streams at once: the same figure = the step at batch 64, against reading the weights and the 64
       sequences' KV (at the decode phase's mean context, 512 + 128) once;
 (ii)  256 concurrent requests, prompts 512, outputs 256 (no end token), over gRPC and again over HTTP
       generate_stream (SSE): output tokens/s, TTFT p50/p99, inter-token p50/p99, time per output token.
       Each served row also gives the server's own mean inter-token time over the run (its
       inferd_llm_inter_token_latency_seconds histogram's sum / count), which the client's figure must match.
Then, in the same call and on the same GPU:
 - the storm (tests/gpu/llm_storm.py): a small KV pool, 96 streams, a third cancelled (gRPC cancel, HTTP
   disconnect): no request lost or cut short, tokens equal alone, preemptions counted, blocks back to 0;
 - transformers' batched generate() at batch 256 (or the largest of 256/128/64/32 that fits): the static
   cache, which makes generate() compile its decode step with torch.compile (given a time cap), then the
   plain dynamic cache when time is left (or when the compiled one failed); the best is the yardstick and
   the table says which ran;
 - bench_llm_decode (the GPU runner alone, no server) at batch 1, 64 and 256, context 512.
Every part has a time limit; one markdown table at the end holds whatever finished.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
GPU = os.path.join(HERE, "..", "..", "gpu")
sys.path.insert(0, GPU)
import llm_gpu_util as U  # noqa: E402

PROMPT, NEW, CONC, MID, VOCAB = 512, 256, 256, 64, 128256
R = {}  # the figures, filled as parts finish
SMOKE = False  # --smoke: this script's plumbing on the CPU (no torch): a tiny fixture model, small sizes


def left(a):
    return a.deadline - time.time()


def llama1b_config():
    import transformers as tf
    c = tf.LlamaConfig(vocab_size=VOCAB, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
                       rms_norm_eps=1e-5, tie_word_embeddings=True)
    # RoPE left at the config's default (no llama3 scaling, whose spelling differs between transformers 4
    # and 5): it changes no cost
    return U.no_eos(c)


def bandwidth():
    import torch
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    it = 20
    t0 = time.perf_counter()
    for _ in range(it):
        b.copy_(a)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    del a, b
    torch.cuda.empty_cache()
    return 2.0 * n * it / dt


def weight_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".safetensors"))


def server_itl(srv):
    """(sum seconds, count) of the server's inter-token histogram, every model."""
    s = c = 0.0
    for line in srv.metrics().splitlines():
        if line.startswith("inferd_llm_inter_token_latency_seconds_sum"):
            s += float(line.rsplit(None, 1)[1])
        elif line.startswith("inferd_llm_inter_token_latency_seconds_count"):
            c += float(line.rsplit(None, 1)[1])
    return s, c


def load(a, srv, tag, api, n, conc, out, seed, limit):
    """One `inferd-load generate` run; returns its JSON report (plus the server's mean inter-token ms over
    the run as srv_itl_ms), or None (why is logged)."""
    url = "127.0.0.1:%d" % (srv.grpc_port if api == "grpc" else srv.port)
    js = os.path.join(a.work, "load_%s.json" % tag)
    cmd = [os.path.join(a.bin, "inferd-load"), "generate", "--api", api, "-u", url, "-m", "l1b",
           "--num-requests", str(n), "--concurrency", str(conc), "--prompt-len", str(PROMPT),
           "--output-len", str(out), "--vocab-size", str(VOCAB), "--seed", str(seed), "--json", js]
    s0, c0 = server_itl(srv)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        U.log("  %s: inferd-load did not finish within %d s" % (tag, limit))
        return None
    if p.returncode != 0 or not os.path.exists(js):
        U.log("  %s: inferd-load exit %d: %s %s" % (tag, p.returncode, p.stdout[-800:], p.stderr[-800:]))
        return None
    j = json.load(open(js))[0]
    s1, c1 = server_itl(srv)
    j["srv_itl_ms"] = (s1 - s0) / (c1 - c0) * 1e3 if c1 > c0 else float("nan")
    U.log("  %s (%s, %d requests, concurrency %d, output %d): %d completed, %d failed, %d short; %.0f output tok/s; "
          "TTFT p50 %.1f p99 %.1f ms; ITL p50 %.3f p99 %.3f ms (server mean %.3f); TPOT p50 %.3f ms"
          % (tag, api, n, conc, out, j["completed"], j["failed"], j["short_outputs"], j["output_tokens_per_s"],
             j["ttft_ms"]["p50"], j["ttft_ms"]["p99"], j["itl_ms"]["p50"], j["itl_ms"]["p99"], j["srv_itl_ms"],
             j["tpot_ms"]["p50"]))
    if j["failed"] or j["short_outputs"]:
        U.log("    errors: %s, first: %s" % (j["errors_by_kind"], j["first_error"]))
    return j


def part_server(a, bw, wbytes):
    srv = U.Server(os.path.join(a.bin, "inferd"), a.repo, os.path.join(a.work, "inferd.log"))
    try:
        t0 = time.time()
        srv.start(timeout=240)
        srv.wait_models(["l1b"], timeout=120)
        R["load_s"] = time.time() - t0
        for l in srv.grep("CUDA device") + srv.grep("is ready in"):
            U.log("  " + l)
        # warm: 256 short requests, so the graphs of the buckets are captured before the clock runs. Each run
        # has its own seed: its prompts are new to the prefix cache
        load(a, srv, "warm256", "grpc", CONC, CONC, 8, 1, 90)
        j = load(a, srv, "one", "grpc", 3, 1, NEW, 2, 60)
        if j:
            R["one"] = j
            R["one_bound_ms"] = wbytes / bw * 1e3
        j = load(a, srv, "b64", "grpc", MID, MID, NEW, 3, 90)
        if j:
            R["b64"] = j
            kv = 2 * 16 * 8 * 64 * 2 * MID * (PROMPT + NEW / 2)
            R["b64_bound_ms"] = (wbytes + kv) / bw * 1e3
        for api, seed in (("grpc", 5), ("http", 6)):
            j = load(a, srv, "c256_" + api, api, CONC, CONC, NEW, seed, 150)
            if j:
                R["c256_" + api] = j
        m = srv.metrics()
        for l in m.splitlines():
            if not l.startswith("#") and ("preempt" in l or "kv_blocks" in l):
                U.log("  metrics: " + l)
    except Exception:
        traceback.print_exc()
        U.log("inferd log tail:\n" + srv.tail())
    finally:
        U.log("inferd exit code after SIGTERM: %s" % srv.stop())


def part_storm(a):
    limit = int(min(150, left(a) - 150))  # leaves transformers and bench_llm_decode their share
    if limit < 40:
        U.log("storm: no time left")
        return
    js = os.path.join(a.work, "storm.json")
    try:
        extra = ["--kind", "KIND_CPU", "--fixture"] if SMOKE else []
        p = subprocess.run([sys.executable, os.path.join(GPU, "llm_storm.py"), "--bin", a.bin, "--work", a.work,
                            "--json", js] + extra, capture_output=True, text=True, timeout=limit)
        U.log(p.stdout.rstrip() + ("\n" + p.stderr[-1500:] if p.returncode else ""))
        if os.path.exists(js):
            R["storm"] = json.load(open(js))
            R["storm"]["rc"] = p.returncode
            R["storm_lines"] = [l for l in p.stdout.splitlines() if l.startswith(("PASS storm", "FAIL storm"))]
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        U.log("storm: killed after %d s; its output:\n%s" % (limit, out[-3000:]))


HF_CHILD = r'''
import sys, time, torch, transformers as tf
path, mode, batch, prompt, new = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
m = tf.AutoModelForCausalLM.from_pretrained(path).half().to("cuda").eval()
m.generation_config.eos_token_id = None
kw = dict(max_new_tokens=new, do_sample=False, pad_token_id=0, eos_token_id=None)
if mode == "static":
    # a static cache: generate() compiles its decode step itself (torch.compile, CUDA graphs), as
    # transformers' docs recommend for speed
    kw["cache_implementation"] = "static"
g = torch.Generator().manual_seed(3)
x = torch.randint(0, m.config.vocab_size, (batch, prompt), generator=g).cuda()
am = torch.ones_like(x)
with torch.no_grad():
    t0 = time.perf_counter()
    # warm-up: the full length with the static cache (the timed run reuses what it compiled)
    m.generate(input_ids=x, attention_mask=am, **dict(kw, max_new_tokens=new if mode == "static" else 4))
    torch.cuda.synchronize()
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    o = m.generate(input_ids=x, attention_mask=am, **kw)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
n = (o.shape[1] - prompt) * batch
try:
    from torch._dynamo.utils import counters
    graphs = int(counters["stats"]["unique_graphs"])
except Exception:
    graphs = -1
print("HF_RESULT %s %d %d %.4f %.1f %d" % (mode, batch, n, dt, warm, graphs), flush=True)
'''


def hf_run(a, ck, mode, cap):
    for batch in (256, 128, 64, 32):
        lim = int(min(cap, left(a) - 75))  # bench_llm_decode's share
        if lim < 30:
            U.log("HF %s: no time left" % mode)
            return None
        try:
            p = subprocess.run([sys.executable, "-c", HF_CHILD, ck, mode, str(batch), str(PROMPT), str(NEW)],
                               capture_output=True, text=True, timeout=lim)
        except subprocess.TimeoutExpired:
            U.log("HF %s batch %d: did not finish within %d s" % (mode, batch, lim))
            return None  # a smaller batch of this mode would not compile faster
        line = [l for l in p.stdout.splitlines() if l.startswith("HF_RESULT")]
        if line:
            _, md, b, n, dt, warm, graphs = line[0].split()
            r = {"mode": md, "batch": int(b), "tok_s": int(n) / float(dt), "warm_s": float(warm),
                 "graphs": int(graphs)}
            U.log("HF %s batch %s: %s tokens in %s s: %.0f tokens/s (warm-up %s s; dynamo graphs %s)"
                  % (md, b, n, dt, r["tok_s"], warm, graphs))
            return r
        err = (p.stderr or "").strip().splitlines()
        oom = any("out of memory" in l.lower() for l in err)
        why = "out of memory" if oom else (err[-1] if err else p.returncode)
        U.log("HF %s batch %d: failed (%s)" % (mode, batch, why))
        if not oom:
            return None
    return None


def part_hf(a, ck):
    r = hf_run(a, ck, "static", 150)
    if r:
        R["hf_static"] = r
    if not r or left(a) > 130:
        r = hf_run(a, ck, "plain", 100)
        if r:
            R["hf_plain"] = r


DECODE_TITLES = ("plain", "graphs", "greedy")


def part_decode(a):
    exe = os.path.join(a.bin, "bench_llm_decode")
    lim = int(left(a) - 5)
    if not os.access(exe, os.X_OK) or lim < 30:
        U.log("bench_llm_decode: %s" % ("not in BINDIR" if not os.access(exe, os.X_OK) else "no time left"))
        return
    try:
        p = subprocess.run([exe, "--dir", os.path.join(a.work, "bench_ckpt"), "--ctx", "512", "--batches", "1,64,256",
                            "--steps", "10"], capture_output=True, text=True, timeout=lim)
        out = p.stdout
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        U.log("bench_llm_decode: killed after %d s" % lim)
    U.log("bench_llm_decode:\n" + out.rstrip())
    # three tables (plain launches, CUDA graphs, graphs with greedy ids on the device), rows of 6 numbers
    table, rows = -1, {}
    for l in out.splitlines():
        if re.match(r"^\s*batch\s+step", l):
            table += 1
            continue
        f = l.split()
        if table >= 0 and len(f) == 6 and all(re.match(r"^[0-9.]+$", x) for x in f):
            rows[(DECODE_TITLES[min(table, 2)], int(f[0]))] = (float(f[1]), float(f[4]), float(f[5]))
    R["decode"] = rows


def fmt(x, f="%.3f"):
    return f % x if isinstance(x, (int, float)) else "n/a"


def table():
    rows = [("memory bandwidth (D2D copy, read + write)", fmt(R.get("bw_gbs"), "%.0f GB/s"), "", ""),
            ("weights (FP16, tied)", fmt(R.get("w_gb"), "%.2f GB"), "", ""),
            ("inferd: start to model ready", fmt(R.get("load_s"), "%.1f s"), "", "")]

    def step_row(name, key, bound):
        # the step: time per output token after the first (p50 over requests: robust to tokens that arrive
        # in bursts), beside the inter-token p50 and the server's own mean gap
        j = R.get(key)
        tp = j["tpot_ms"]["p50"] if j else None
        b = R.get(bound)
        rows.append((name + " (TPOT p50; inter-token p50; server mean)",
                     "%s; %s; %s" % (fmt(tp, "%.3f ms"), fmt(j["itl_ms"]["p50"], "%.3f") if j else "n/a",
                                     fmt(j["srv_itl_ms"], "%.3f") if j else "n/a"),
                     fmt(b, "%.3f ms"), fmt(tp / b, "%.2f") if tp and b else "n/a"))
    step_row("one stream: decode step", "one", "one_bound_ms")
    step_row("batch 64: decode step", "b64", "b64_bound_ms")
    for api in ("grpc", "http"):
        j = R.get("c256_" + api)
        label = "256 streams, 512 in / 256 out, %s" % ("gRPC ModelStreamInfer" if api == "grpc" else "HTTP SSE")
        if not j:
            rows.append((label + ": output tokens/s", "n/a", "", ""))
            continue
        rows.append((label + ": output tokens/s", "%.0f (%d of %d completed, %d short)"
                     % (j["output_tokens_per_s"], j["completed"], j["requests"], j["short_outputs"]), "", ""))
        rows.append(("  TTFT p50 / p99", "%.0f / %.0f ms" % (j["ttft_ms"]["p50"], j["ttft_ms"]["p99"]), "", ""))
        rows.append(("  inter-token p50 / p99 (server mean)", "%.2f / %.2f ms (%.2f)"
                     % (j["itl_ms"]["p50"], j["itl_ms"]["p99"], j["srv_itl_ms"]), "", ""))
        rows.append(("  time per output token p50", "%.2f ms" % j["tpot_ms"]["p50"], "", ""))
    hf = [R[k] for k in ("hf_static", "hf_plain") if k in R]
    names = {"static": "static cache + torch.compile (generate()'s own)", "plain": "plain (dynamic cache)"}
    for k, why in (("hf_static", "static"), ("hf_plain", "plain")):
        r = R.get(k)
        rows.append(("transformers generate() %s, batch %s: tokens/s" % (names[why], r["batch"] if r else "-"),
                     fmt(r["tok_s"], "%.0f") + (" (dynamo graphs %d)" % r["graphs"] if r and why == "static" else "")
                     if r else "did not run or finish", "", ""))
    best = max(hf, key=lambda r: r["tok_s"]) if hf else None
    srv = R.get("c256_grpc") or R.get("c256_http")
    rows.append(("inferd / transformers' best (%s) tokens/s" % (best["mode"] if best else "-"),
                 fmt(srv["output_tokens_per_s"] / best["tok_s"], "%.2f") if srv and best else "n/a", ">= 5", ""))
    s = R.get("storm")
    if s:
        rows.append(("storm: %d streams on %d KV blocks, %d cancelled (%d gRPC, %d HTTP)%s"
                     % (s["requests"], s["kv_blocks"], s["cancelled_grpc"] + s["cancelled_http"], s["cancelled_grpc"],
                        s["cancelled_http"], "" if s.get("grpc") else ", no grpcio: HTTP only"),
                     "%s: %d finished, lost %d, cut %d, wrong %d, near-ties %d, preemptions %d"
                     % ("PASS" if s["passed"] else "FAIL", s["finished"], s["lost"], s["cut"], s["wrong"],
                        s["near_ties"], s["preemptions"]), "", ""))
    else:
        rows.append(("storm (cancellations, full KV pool)", "did not run or finish", "", ""))
    for (t, b), (ms, floor, ratio) in sorted(R.get("decode", {}).items()):
        rows.append(("bench_llm_decode %s, batch %d, ctx 512" % (t, b), "%.3f ms" % ms, "%.3f ms" % floor,
                     "%.2f" % ratio))
    U.log("\n| Llama-3.2-1B shape, random FP16, one run | measured | bound / goal | ratio |")
    U.log("|---|---|---|---|")
    for r in rows:
        U.log("| %s | %s | %s | %s |" % r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--budget", type=float, default=420)
    ap.add_argument("--smoke", action="store_true", help="the plumbing on the CPU, no torch: tiny sizes")
    a = ap.parse_args()
    a.deadline = time.time() + a.budget
    if a.smoke:
        return smoke(a)
    try:
        import torch
        U.log("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name(0)))
        R["bw_gbs"] = bandwidth() / 1e9
        U.log("bandwidth %.0f GB/s" % R["bw_gbs"])
        a.repo = os.path.join(a.work, "repo")
        ck = os.path.join(a.repo, "l1b", "1")
        if not os.path.exists(os.path.join(ck, "model.safetensors")):
            t0 = time.time()
            U.save_model(llama1b_config(), ck, seed=0, dtype="float16")
            U.log("checkpoint written in %.1f s" % (time.time() - t0))
        params = {"max_model_len": "1024", "max_num_seqs": "256", "max_num_batched_tokens": "8192",
                  "kv_block_tokens": "16", "gpu_memory_utilization": "0.85"}
        if os.environ.get("LLM_BENCH_TC") == "1":  # prefill attention on tensor cores (off by default)
            params["tensor_core_prefill"] = "true"
        U.log("server parameters: %s" % params)
        U.write_config(os.path.join(a.repo, "l1b"), params)
        wbytes = weight_bytes(ck)
        R["w_gb"] = wbytes / 1e9
        part_server(a, R["bw_gbs"] * 1e9, wbytes)
        table()  # partial, in case what follows is killed
        part_storm(a)
        part_hf(a, ck)
        part_decode(a)
    except Exception:
        traceback.print_exc()
    table()
    ok = ("c256_grpc" in R or "c256_http" in R) and R.get("storm", {}).get("passed", False)
    return 0 if ok else 1


def smoke(a):
    """Every part through its real code on the CPU with tests/llm's tiny Llama fixture (numpy, no torch):
    inferd-load's runs, the server's inter-token mean, the storm (--fixture), the table. transformers and
    bench_llm_decode report that they did not run."""
    global PROMPT, NEW, CONC, MID, VOCAB, SMOKE
    sys.path.insert(0, os.path.join(HERE, "..", "..", "llm"))
    import llm_ckpt
    with open(os.path.join(HERE, "..", "..", "llm", "fixtures", "llama3_gqa.json")) as f:
        fx = json.load(f)
    fx["config"]["eos_token_id"] = None  # outputs run to their length, as the GPU model's
    fx["generation_config"] = {k: v for k, v in fx.get("generation_config", {}).items() if "token_id" not in k}
    PROMPT, NEW, CONC, MID, VOCAB, SMOKE = 32, 32, 16, 8, fx["config"]["vocab_size"], True
    a.repo = os.path.join(a.work, "repo")
    ck = os.path.join(a.repo, "l1b", "1")
    llm_ckpt.write_checkpoint(fx, ck)
    U.write_config(os.path.join(a.repo, "l1b"), {"max_model_len": "128", "max_num_seqs": "16", "kv_block_tokens": "4",
                                                 "kv_cache_blocks": "512"}, gpus=(), kind="KIND_CPU")
    R["w_gb"] = weight_bytes(ck) / 1e9
    part_server(a, 1e10, weight_bytes(ck))
    part_storm(a)
    part_hf(a, ck)
    part_decode(a)
    table()
    return 0 if ("c256_grpc" in R and R.get("storm", {}).get("passed")) else 1


if __name__ == "__main__":
    sys.exit(main())
