"""tests/bench/llm/llm_gpu_bench.py: the GPU serving figures of issue 35's done-when, on a Llama-3.2-1B-shaped
model with random FP16 weights saved by transformers on the device (hidden 2048, 16 layers, 32 heads over 8 KV
heads of 64, MLP 8192, vocab 128256, tied embeddings; default RoPE). Run by llm_gpu_bench.sh.

 (i)   memory bandwidth (torch: 1 GiB device-to-device copies, bytes read + written per second), the
       weight-read bound (weight bytes / bandwidth), inferd's one-stream decode step (the median gap
       between tokens of one generate_stream request, prompt 512, 256 tokens) and their ratio;
 (iii) the step at batch 64 (64 streams at once, prompt 512, 256 tokens: the median gap between tokens
       while all 64 decode) against the bound of reading the weights and the 64 sequences' KV (at the
       mean context of the decode phase, 512 + 128) once;
 (ii)  256 concurrent streams, prompts of 512 random tokens, 256 tokens each (no end token): output
       tokens/s (all tokens over the wall time from the first send to the last token), TTFT p50/p99,
       inter-token p50/p99 (client-side, per stream); then transformers' batched generate() on the same
       GPU: static cache + torch.compile (given 90 s), else the plain batched generate, at batch 256 or the
       largest of 256/128/64/32 that fits, tokens/s, and the ratio.
Every part has its own time limit; whatever finished is printed in the final markdown table.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "gpu"))
import llm_gpu_util as U  # noqa: E402

PROMPT, NEW, CONC, MID = 512, 256, 256, 64
R = {}  # the figures, filled as parts finish


def llama1b_config():
    import transformers as tf
    c = tf.LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
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


def streams(srv, n, ps, new, t_limit):
    """n generate_stream requests at once; returns per-stream (t_send, [token times]) and the wall span."""
    res = [None] * n

    def one(i):
        try:
            st, toks, t0, times = U.generate_stream(srv, "l1b", {"input_ids": ps[i], "request_output_len": new},
                                                    timeout=t_limit)
            res[i] = (t0, times) if st == 200 else None
            if st != 200:
                U.log("  stream %d: HTTP %s %s" % (i, st, str(toks)[:200]))
        except Exception as e:  # noqa: BLE001
            U.log("  stream %d: %r" % (i, e))

    th = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in th:
        t.start()
    t_end = time.time() + t_limit
    for t in th:
        t.join(max(0.1, t_end - time.time()))
    return [r for r in res if r]


def itl_of(rs, skip_first=True):
    gaps = []
    for t0, times in rs:
        for k in range(1, len(times)):
            g = times[k] - times[k - 1]
            if g > 0 or not skip_first:
                gaps.append(g)
    return gaps


def part_server(a, ck, bw, wbytes):
    srv = U.Server(os.path.join(a.bin, "inferd"), a.repo, os.path.join(a.work, "inferd.log"))
    rng = random.Random(5)
    ps = [[rng.randrange(128256) for _ in range(PROMPT)] for _ in range(CONC)]
    try:
        t0 = time.time()
        srv.start(timeout=240)
        srv.wait_models(["l1b"], timeout=120)
        R["load_s"] = time.time() - t0
        for l in srv.grep("CUDA device") + srv.grep("is ready in"):
            U.log("  " + l)
        # warm: a short request of each size class, so the graphs are captured before the clock runs
        streams(srv, 4, ps, 8, 60)
        # (i) one stream
        rs = streams(srv, 1, ps, NEW, 60)
        if rs:
            g = sorted(itl_of(rs))
            step = g[len(g) // 2]
            R["one_step_ms"] = step * 1e3
            R["one_bound_ms"] = wbytes / bw * 1e3
            U.log("(i) one stream: median inter-token %.3f ms; weight-read bound %.3f ms; ratio %.2f"
                  % (step * 1e3, R["one_bound_ms"], step * 1e3 / R["one_bound_ms"]))
        # (iii) batch 64: the inter-token gaps of the decode phase (after every stream's first token)
        rs = streams(srv, MID, ps, NEW, 90)
        if len(rs) == MID:
            start = max(times[0] for _, times in rs if times)
            g = sorted(t - s for _, times in rs for s, t in zip(times, times[1:]) if s >= start and t > s)
            if g:
                step = g[len(g) // 2]
                kv = 2 * 16 * 8 * 64 * 2 * MID * (PROMPT + NEW / 2)
                R["b64_step_ms"] = step * 1e3
                R["b64_bound_ms"] = (wbytes + kv) / bw * 1e3
                U.log("(iii) batch 64: median step %.3f ms; weights + KV (%.2f GB) bound %.3f ms; ratio %.2f"
                      % (step * 1e3, (wbytes + kv) / 1e9, R["b64_bound_ms"], step * 1e3 / R["b64_bound_ms"]))
        # (ii) 256 streams
        t0 = time.perf_counter()
        rs = streams(srv, CONC, ps, NEW, 150)
        toks = sum(len(t) for _, t in rs)
        if rs:
            t_last = max(t[-1] for _, t in rs if t)
            ttft = [t[0] - s for s, t in rs if t]
            itl = itl_of(rs)
            R["srv_streams_ok"] = len(rs)
            R["srv_tok_s"] = toks / (t_last - t0)
            R["ttft_p50"], R["ttft_p99"] = U.pctl(ttft, 50) * 1e3, U.pctl(ttft, 99) * 1e3
            R["itl_p50"], R["itl_p99"] = U.pctl(itl, 50) * 1e3, U.pctl(itl, 99) * 1e3
            U.log("(ii) %d of %d streams, %d tokens in %.1f s: %.0f tokens/s; TTFT p50 %.0f ms p99 %.0f ms; ITL p50 "
                  "%.1f ms p99 %.1f ms" % (len(rs), CONC, toks, t_last - t0, R["srv_tok_s"], R["ttft_p50"],
                                          R["ttft_p99"], R["itl_p50"], R["itl_p99"]))
        m = srv.metrics()
        for l in m.splitlines():
            if not l.startswith("#") and ("preempt" in l or "kv_cache" in l or "blocks" in l):
                U.log("  metrics: " + l)
    except Exception:
        traceback.print_exc()
        U.log("inferd log tail:\n" + srv.tail())
    finally:
        U.log("inferd exit code after SIGTERM: %s" % srv.stop())


HF_CHILD = r'''
import sys, time, torch, transformers as tf
path, mode, batch, prompt, new = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
m = tf.AutoModelForCausalLM.from_pretrained(path).half().to("cuda").eval()
m.generation_config.eos_token_id = None
kw = dict(max_new_tokens=new, do_sample=False, pad_token_id=0, eos_token_id=None)
if mode == "compile":
    m.generation_config.cache_implementation = "static"
    m.forward = torch.compile(m.forward, mode="reduce-overhead", fullgraph=True)
g = torch.Generator().manual_seed(3)
x = torch.randint(0, m.config.vocab_size, (batch, prompt), generator=g).cuda()
am = torch.ones_like(x)
with torch.no_grad():
    # warm-up; with the static cache the same length, so the timed run reuses the compiled graphs
    m.generate(input_ids=x, attention_mask=am, **dict(kw, max_new_tokens=new if mode == "compile" else 4))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    o = m.generate(input_ids=x, attention_mask=am, **kw)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
n = (o.shape[1] - prompt) * batch
print("HF_RESULT %s %d %d %.4f" % (mode, batch, n, dt), flush=True)
'''


def part_hf(a, ck):
    py = sys.executable
    for mode, limit in (("compile", 90), ("plain", 100)):
        for batch in (256, 128, 64, 32):
            left = a.deadline - time.time()
            if left < 20:
                U.log("HF %s: no time left" % mode)
                return
            try:
                p = subprocess.run([py, "-c", HF_CHILD, ck, mode, str(batch), str(PROMPT), str(NEW)],
                                   capture_output=True, text=True, timeout=min(limit, left - 5))
            except subprocess.TimeoutExpired:
                U.log("HF %s batch %d: did not finish within %d s" % (mode, batch, min(limit, left - 5)))
                break  # a smaller batch of this mode would not compile faster
            line = [l for l in p.stdout.splitlines() if l.startswith("HF_RESULT")]
            if line:
                _, md, b, n, dt = line[0].split()
                R["hf_mode"], R["hf_batch"], R["hf_tok_s"] = md, int(b), int(n) / float(dt)
                U.log("HF %s batch %s: %s tokens in %s s: %.0f tokens/s" % (md, b, n, dt, R["hf_tok_s"]))
                return
            err = (p.stderr or "").strip().splitlines()
            oom = any("out of memory" in l.lower() for l in err)
            U.log("HF %s batch %d: failed (%s)" % (mode, batch, "out of memory" if oom else (err[-1] if err else p.returncode)))
            if not oom:
                break


def table():
    def f(k, fmt="%.3f"):
        return fmt % R[k] if k in R else "n/a"

    def ratio(x, y):
        return "%.2f" % (R[x] / R[y]) if x in R and y in R and R[y] else "n/a"
    rows = [
        ("memory bandwidth (D2D copy, read + write)", f("bw_gbs", "%.0f GB/s"), "", ""),
        ("weights (FP16, tied)", f("w_gb", "%.2f GB"), "", ""),
        ("one stream: decode step (median inter-token)", f("one_step_ms", "%.3f ms"),
         f("one_bound_ms", "%.3f ms (weights / bw)"), ratio("one_step_ms", "one_bound_ms")),
        ("batch 64: decode step (median inter-token)", f("b64_step_ms", "%.3f ms"),
         f("b64_bound_ms", "%.3f ms (weights + KV / bw)"), ratio("b64_step_ms", "b64_bound_ms")),
        ("256 streams, 512 in / 256 out: output tokens/s", f("srv_tok_s", "%.0f"), "", ""),
        ("  TTFT p50 / p99", "%s / %s" % (f("ttft_p50", "%.0f ms"), f("ttft_p99", "%.0f ms")), "", ""),
        ("  inter-token p50 / p99", "%s / %s" % (f("itl_p50", "%.1f ms"), f("itl_p99", "%.1f ms")), "", ""),
        ("transformers generate() %s, batch %s: tokens/s" % (R.get("hf_mode", "?"), R.get("hf_batch", "?")),
         f("hf_tok_s", "%.0f"), "", ""),
        ("inferd / transformers tokens/s", ratio("srv_tok_s", "hf_tok_s"), "", ""),
    ]
    U.log("\n| Llama-3.2-1B shape, random FP16, H200 | measured | bound | ratio |")
    U.log("|---|---|---|---|")
    for r in rows:
        U.log("| %s | %s | %s | %s |" % r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--budget", type=float, default=400)
    a = ap.parse_args()
    a.deadline = time.time() + a.budget
    try:
        import torch
        U.log("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name(0)))
        bw = bandwidth()
        R["bw_gbs"] = bw / 1e9
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
        part_server(a, ck, bw, wbytes)
        table()  # partial, in case what follows is killed
        part_hf(a, ck)
    except Exception:
        traceback.print_exc()
    table()
    return 0 if "srv_tok_s" in R else 1


if __name__ == "__main__":
    sys.exit(main())
