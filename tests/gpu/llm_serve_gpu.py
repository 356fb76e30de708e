"""tests/gpu/llm_serve_gpu.py: inferd's generative backend on a GPU against transformers on the same GPU
(issue 35). Run by tests/gpu/llm_serve_gpu.sh, which says how; needs torch with CUDA and transformers.

(a) Random-weight tiny Llama, Qwen2, Mistral and GPT-2 checkpoints (seeded; 4 layers, hidden 256, vocab
    1024, no end token) saved in FP32 by transformers, served by inferd on GPU 0 (KIND_GPU, FP32 weights,
    CUDA graphs on): 32 concurrent greedy requests (prompts of 7, 33, 100 and 250 random tokens, eight of
    each; half sent at once, the rest joining one by one while those run), 200 new tokens each, compared
    token for token with transformers' generate() (do_sample False, FP32, TF32 off, eager attention) run
    on the same prompts in batches of equal length (no padding). PASS, or FAIL with the first mismatch
    (request, position, and transformers' top-two logit gap there: a gap within 1e-4 of the largest logit
    is a near-tie that FP32 rounding may flip, reported as such and not failed).
(b) The Llama checkpoint saved in FP16 and in BF16, served in its own type: the same 32 greedy requests
    must complete with 200 tokens each; the server returns tokens, not logits, so the bound is checked
    through what it implies: with transformers' FP32 logits l (the same 16-bit weights, teacher-forced on
    the server's own tokens), a server whose logits l' satisfy ||l' - l||_2 <= eps ||l||_2 can only pick
    tokens t with max(l) - l[t] <= 2 eps ||l||_2. eps is test_gpu_llm_step's bound (FP16 2e-2, BF16 6e-2);
    the worst ratio (max(l) - l[t]) / ||l||_2 over every step must stay within 2 eps, and (since that is
    loose for BF16) the chosen token must be l's argmax at half the steps at least (a broken runner: about
    1/vocab). Printed besides: the token agreement with transformers' own 16-bit greedy run (information
    only: 16-bit runs diverge after a near-tie). The same checks again with parameter tensor_core_prefill
    (b/llama_<type>_tc: prefill attention on tensor cores, off by default).
(gpu) test_k_cuda_llm and test_gpu_llm_step when they are in the binary folder (the kernels, the
    tensor-core prefill path against the CUDA-core one; the runner's logits against the CPU's with the
    bounds above, on the fixture checkpoints).
(c) A sampled request (temperature 0.8, runtime_top_p 0.9, random_seed 7, 100 tokens) sent twice alone and
    once among 16 others gives the same tokens each time.
(d) Sampling on the device against the host sampler (issue 35 item 5): the FP32 Llama served twice, its
    sampled rows drawn on the GPU (kernels/sample, the default) and, as llama_f32_host, on the host
    (parameter host_sampling); seeded requests sent alone (so the logits are the same) with temperature /
    top_p / top_k / min_p / repetition penalty mixes give the same 100 tokens on both.

Prints one PASS / FAIL line per check and exits 1 when any failed.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llm_gpu_util as U  # noqa: E402

FAMILIES = ["llama", "qwen2", "mistral", "gpt2"]
LENGTHS = [7, 33, 100, 250]
N_REQ = 32
NEW = 200
VOCAB = 1024
EPS = {"float16": 2e-2, "bfloat16": 6e-2}
TIE_REL = 1e-4

results = []  # (name, ok, detail)


def report(name, ok, detail):
    results.append((name, ok, detail))
    U.log("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail))


def prompts(seed=1234):
    rng = random.Random(seed)
    ps = []
    for i in range(N_REQ):
        n = LENGTHS[i % len(LENGTHS)]
        ps.append([rng.randrange(VOCAB) for _ in range(n)])
    return ps


def serve_all(srv, model, ps, new, extra=None, stagger=0.1):
    """The requests of ps on threads: half at once, the rest one by one stagger seconds apart (joining
    while the first run). Returns [(status, output_ids or error text)] in ps's order."""
    out = [None] * len(ps)

    def one(i):
        body = {"input_ids": ps[i], "request_output_len": new}
        body.update(extra or {})
        try:
            st, j = U.generate(srv, model, body)
            out[i] = (st, j["output_ids"] if st == 200 and isinstance(j, dict) else j)
        except Exception as e:  # noqa: BLE001
            out[i] = (-1, repr(e))

    th = []
    for i in range(len(ps)):
        t = threading.Thread(target=one, args=(i,), daemon=True)
        t.start()
        th.append(t)
        if i >= len(ps) // 2:
            time.sleep(stagger)
    for t in th:
        t.join(300)
    return [o if o is not None else (-1, "no answer within 300 s") for o in out]


def hf_greedy(model, ps, new, want_scores):
    """transformers' greedy tokens for ps, batched by equal length; with want_scores also each step's
    top-two gap and logit scale per request."""
    import torch
    toks = [None] * len(ps)
    gaps = [None] * len(ps)
    by_len = {}
    for i, p in enumerate(ps):
        by_len.setdefault(len(p), []).append(i)
    for n, idx in by_len.items():
        x = torch.tensor([ps[i] for i in idx], device="cuda")
        with torch.no_grad():
            o = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=new,
                               do_sample=False, num_beams=1, eos_token_id=None,
                               pad_token_id=0, return_dict_in_generate=True, output_scores=want_scores)
        seq = o.sequences[:, n:].tolist()
        for k, i in enumerate(idx):
            toks[i] = seq[k]
        if want_scores:
            sc = torch.stack([s.float() for s in o.scores], 1)  # [batch, new, vocab]
            top2 = sc.topk(2, dim=-1).values
            gap = (top2[..., 0] - top2[..., 1]).cpu()
            scale = sc.abs().amax(-1).cpu()
            for k, i in enumerate(idx):
                gaps[i] = (gap[k].tolist(), scale[k].tolist())
    return toks, gaps


def load_hf(path, dtype):
    import torch
    import transformers as tf
    m = tf.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    m = m.to(device="cuda", dtype=getattr(torch, dtype)).eval()
    m.generation_config.eos_token_id = None
    return m


def check_exact(fam, srv_out, ref, gaps):
    bad = [(i, s) for i, s in enumerate(srv_out) if s[0] != 200 or not isinstance(s[1], list) or len(s[1]) != NEW]
    if bad:
        i, s = bad[0]
        return report("a/%s" % fam, False, "%d of %d requests failed or came back short; request %d: %s %s"
                      % (len(bad), N_REQ, i, s[0], str(s[1])[:300]))
    # every request that differs: its first mismatch, and whether transformers' top two were a near-tie there
    diffs = []
    for i, (st, got) in enumerate(srv_out):
        p = next((k for k in range(NEW) if got[k] != ref[i][k]), None)
        if p is not None:
            g, sc = gaps[i][0][p], gaps[i][1][p]
            diffs.append((p, i, g, sc, g <= TIE_REL * max(sc, 1e-30)))
    if not diffs:
        return report("a/%s" % fam, True, "%d requests x %d tokens equal to transformers (FP32)" % (N_REQ, NEW))
    real = [d for d in diffs if not d[4]]
    p, i, g, sc, tie = min(real) if real else min(diffs)
    detail = ("%d of %d requests differ (%d at a near-tie); first %s mismatch: request %d (prompt %d tokens) at new "
              "token %d: inferd %d, transformers %d; transformers' top-two gap there %.3g (logit scale %.3g)"
              % (len(diffs), N_REQ, len(diffs) - len(real), "real" if real else "near-tie", i,
                 LENGTHS[i % len(LENGTHS)], p, srv_out[i][1][p], ref[i][p], g, sc))
    if not real:
        return report("a/%s" % fam, True, "near-ties only (FP32 rounding may flip them): " + detail)
    return report("a/%s" % fam, False, detail)


def check_lowp(dt, path, srv_out, ps, ref16, tag=""):
    import torch
    bad = [(i, s) for i, s in enumerate(srv_out) if s[0] != 200 or not isinstance(s[1], list) or len(s[1]) != NEW]
    if bad:
        i, s = bad[0]
        return report("b/llama_%s%s" % (dt, tag), False, "%d requests failed or came back short; request %d: %s %s"
                      % (len(bad), i, s[0], str(s[1])[:300]))
    m = load_hf(path, "float32")  # the 16-bit weights, computed in FP32
    worst, where = 0.0, None
    hit = total = 0
    with torch.no_grad():
        for i, (_, got) in enumerate(srv_out):
            x = torch.tensor([ps[i] + got], device="cuda")
            lg = m(input_ids=x).logits[0, len(ps[i]) - 1:-1].float()  # the logits that chose each new token
            t = torch.tensor(got, device="cuda")
            r = (lg.amax(-1) - lg.gather(1, t[:, None])[:, 0]) / lg.norm(dim=-1)
            hit += int((lg.argmax(-1) == t).sum().item())
            total += len(got)
            v, k = r.max(0)
            if v.item() > worst:
                worst, where = v.item(), (i, k.item())
    del m
    torch.cuda.empty_cache()
    agree = [next((p for p in range(NEW) if srv_out[i][1][p] != ref16[i][p]), NEW) for i in range(N_REQ)]
    lim = 2 * EPS[dt]
    rate = hit / max(total, 1)
    detail = ("worst (max l - l[chosen]) / ||l||_2 = %.3g (limit 2 x %.0e = %.0e) at request %s; chosen token = the "
              "FP32 argmax at %.2f%% of %d steps (at least 50%% required: a broken runner agrees ~1/vocab); tokens "
              "equal to transformers' %s greedy run: %d of %d requests fully, mean first divergence at %.0f of %d"
              % (worst, EPS[dt], lim, where, 100 * rate, total, dt, sum(a == NEW for a in agree), N_REQ,
                 sum(agree) / N_REQ, NEW))
    report("b/llama_%s%s" % (dt, tag), worst <= lim and rate >= 0.5, detail)


def run_gpu_tests(bindir, py, work):
    """The CUDA unit tests of the decoder when they are in bindir: test_k_cuda_llm (the kernels, the
    tensor-core prefill path against the CUDA-core one), test_k_cuda_sample (the device sampler against
    its C reference, id for id) and test_gpu_llm_step (the runner against the CPU's)."""
    root = os.path.dirname(os.path.dirname(HERE))
    runs = [("test_k_cuda_llm", []), ("test_k_cuda_sample", []),
            ("test_gpu_llm_step", [os.path.join(work, "fixture_ckpts"), py,
                                   os.path.join(root, "tests", "llm", "write_ckpts.py")])]
    for name, args in runs:
        exe = os.path.join(bindir, name)
        if not os.access(exe, os.X_OK):
            U.log("SKIP gpu/%s: %s not found (copy build/bin/%s there to run it)" % (name, exe, name))
            continue
        try:
            p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=120)
            lines = (p.stdout + p.stderr).strip().splitlines()
            fails = [l for l in lines if "FAIL" in l][:4]
            tail = fails + lines[-3:]
            if p.returncode == 77:
                U.log("SKIP gpu/%s: %s" % (name, " | ".join(tail)))
            else:
                report("gpu/%s" % name, p.returncode == 0, "exit %d: %s" % (p.returncode, " | ".join(tail)))
        except subprocess.TimeoutExpired:
            report("gpu/%s" % name, False, "no result within 120 s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="folder with inferd (and optionally test_gpu_llm_step)")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    t_start = time.time()
    import torch
    if not torch.cuda.is_available():
        U.log("FAIL: torch sees no CUDA device")
        return 1
    try:  # FP32 GEMMs in FP32, as inferd's (TF32 off; torch's default, said again)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    except Exception as e:  # noqa: BLE001
        U.log("note: could not set allow_tf32: %r" % e)
    U.log("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name(0)))
    repo = os.path.join(a.work, "repo")
    ck = {}
    base = {"max_model_len": "512", "max_num_seqs": "32", "max_num_batched_tokens": "2048", "kv_block_tokens": "16"}
    for k, fam in enumerate(FAMILIES):
        name = fam + "_f32"
        ck[name] = U.save_model(U.tiny_config(fam, vocab=VOCAB), os.path.join(repo, name, "1"), seed=100 + k)
        U.write_config(os.path.join(repo, name), dict(base, kv_cache_blocks="1024", dtype="float32"))
    # (d): the FP32 Llama again, its sampled rows' logits sent to the host sampler
    shutil.copytree(ck["llama_f32"], os.path.join(repo, "llama_f32_host", "1"))
    ck["llama_f32_host"] = os.path.join(repo, "llama_f32_host", "1")
    U.write_config(os.path.join(repo, "llama_f32_host"),
                   dict(base, kv_cache_blocks="1024", dtype="float32", host_sampling="true"))
    for dt in ("float16", "bfloat16"):
        name = "llama_" + dt
        ck[name] = U.save_model(U.tiny_config("llama", vocab=VOCAB), os.path.join(repo, name, "1"), seed=100,
                                dtype=dt)
        # the float16 model sizes its pool from free device memory (the default path); bfloat16 by blocks
        p = dict(base, gpu_memory_utilization="0.05") if dt == "float16" else dict(base, kv_cache_blocks="1024")
        U.write_config(os.path.join(repo, name), p)
        # the same checkpoint with prefill attention on tensor cores (parameter tensor_core_prefill)
        shutil.copytree(ck[name], os.path.join(repo, name + "_tc", "1"))
        ck[name + "_tc"] = os.path.join(repo, name + "_tc", "1")
        U.write_config(os.path.join(repo, name + "_tc"), dict(base, kv_cache_blocks="1024", tensor_core_prefill="true"))
    U.log("checkpoints written in %.1f s" % (time.time() - t_start))
    srv = U.Server(os.path.join(a.bin, "inferd"), repo, os.path.join(a.work, "inferd.log"))
    ps = prompts()
    try:
        srv.start()
        srv.wait_models(list(ck))
        U.log("inferd ready at %.1f s; runner lines:" % (time.time() - t_start))
        for l in srv.grep("CUDA device 0 holds") + srv.grep("is ready in"):
            U.log("  " + l)
        # (a)
        for fam in FAMILIES:
            name = fam + "_f32"
            t0 = time.time()
            out = serve_all(srv, name, ps, NEW)
            t1 = time.time()
            m = load_hf(ck[name], "float32")
            ref, gaps = hf_greedy(m, ps, NEW, True)
            del m
            torch.cuda.empty_cache()
            U.log("  %s: inferd %.1f s, transformers %.1f s" % (name, t1 - t0, time.time() - t1))
            check_exact(name, out, ref, gaps)
        # (b)
        for dt in ("float16", "bfloat16"):
            name = "llama_" + dt
            out = serve_all(srv, name, ps, NEW)
            out_tc = serve_all(srv, name + "_tc", ps, NEW)
            m = load_hf(ck[name], dt)
            ref16, _ = hf_greedy(m, ps, NEW, False)
            del m
            torch.cuda.empty_cache()
            check_lowp(dt, ck[name], out, ps, ref16)
            check_lowp(dt, ck[name], out_tc, ps, ref16, "_tc")
        # (c)
        body = {"temperature": 0.8, "runtime_top_p": 0.9, "random_seed": 7}
        p0 = ps[1]
        r1 = U.generate(srv, "llama_f32", dict(body, input_ids=p0, request_output_len=100))
        r2 = U.generate(srv, "llama_f32", dict(body, input_ids=p0, request_output_len=100))
        crowd = serve_all(srv, "llama_f32", [p0] + ps[:16], 100, extra=body)
        ok = r1[0] == 200 and isinstance(r1[1], dict)
        t1 = r1[1]["output_ids"] if ok else r1
        t2 = r2[1]["output_ids"] if r2[0] == 200 else r2
        t3 = crowd[0][1]
        greedy = U.generate(srv, "llama_f32", {"input_ids": p0, "request_output_len": 100})
        differs = greedy[0] == 200 and greedy[1]["output_ids"] != t1
        report("c/seeded_sampling", ok and t1 == t2 == t3 and len(t1) == 100,
               "three runs (two alone, one among 16 others) %s; 100 tokens; differs from greedy: %s; first tokens %s"
               % ("identical" if t1 == t2 == t3 else "DIFFER", differs, str(t1)[:80]))
        # (d)
        mixes = [dict(body), {"temperature": 1.0, "runtime_top_k": 20, "random_seed": 11},
                 {"temperature": 0.7, "runtime_top_p": 0.95, "min_p": 0.02, "repetition_penalty": 1.3,
                  "random_seed": 3},
                 {"temperature": 1.3, "repetition_penalty": 0.9, "random_seed": 5}]
        same, details = True, []
        for k, mix in enumerate(mixes):
            req = dict(mix, input_ids=ps[k * 3], request_output_len=100)
            dv = U.generate(srv, "llama_f32", req)
            ho = U.generate(srv, "llama_f32_host", req)
            td = dv[1]["output_ids"] if dv[0] == 200 else dv
            th = ho[1]["output_ids"] if ho[0] == 200 else ho
            eq = dv[0] == 200 and ho[0] == 200 and td == th and len(td) == 100
            same = same and eq
            if not eq:
                first = next((i for i, (x, y) in enumerate(zip(td, th)) if x != y), None) \
                    if isinstance(td, list) and isinstance(th, list) else None
                details.append("mix %d differs (first at %s): device %s host %s" % (k, first, str(td)[:60],
                                                                                   str(th)[:60]))
        report("d/device_sampling_vs_host", same,
               "%d seeded mixes, 100 tokens each: %s" % (len(mixes), "; ".join(details) or "identical"))
        run_gpu_tests(a.bin, sys.executable, a.work)
        m = srv.metrics()
        gen = [l for l in m.splitlines() if "generated" in l and not l.startswith("#")][:3]
        U.log("metrics sample: %s" % gen)
    except Exception:
        report("script", False, traceback.format_exc().strip().splitlines()[-1])
        traceback.print_exc()
        U.log("inferd log tail:\n" + srv.tail())
    finally:
        rc = srv.stop()
        U.log("inferd exit code after SIGTERM: %s" % rc)
        if rc not in (0, None):
            report("shutdown", False, "inferd exited %s; log tail:\n%s" % (rc, srv.tail(15)))
    n_bad = sum(1 for r in results if not r[1])
    U.log("\nsummary (%.0f s):" % (time.time() - t_start))
    for n, ok, _ in results:
        U.log("  %-24s %s" % (n, "PASS" if ok else "FAIL"))
    U.log("RESULT: %s (%d checks, %d failed)" % ("PASS" if n_bad == 0 and results else "FAIL", len(results), n_bad))
    return 0 if n_bad == 0 and results else 1


if __name__ == "__main__":
    sys.exit(main())
