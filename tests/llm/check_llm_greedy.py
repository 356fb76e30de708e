"""tests/llm/check_llm_greedy.py: greedy tokens of inferd's CPU decoder
runtime identical to transformers' generate(do_sample=False), for every
fixture in tests/llm/fixtures (Llama 3 with GQA and llama3 RoPE scaling,
Llama 2 in BF16 sharded and tied, Llama with every bias and GeGLU, Qwen2, Mistral with a sliding window,
GPT-2 in FP32 and FP16), and logits within a stated tolerance; then the
loader's refusals, every reason named at once.

    check_llm_greedy.py INFERD_LLM_RUN WORKDIR

Each checkpoint is rebuilt from its fixture with numpy alone (llm_ckpt.py);
the reference tokens and logits were recorded once with transformers
(make_llm_fixtures.py). Every prompt of a fixture runs in one batch, twice:
  roomy: a 8-token step budget, so long prompts are prefilled in chunks in
         the same steps as the others' decode tokens;
  tight: a 6-token budget, 3-token chunks, 2-token blocks in a pool too small
         for all at once, with prefix caching: sequences are preempted and
         recomputed, and must still produce the same tokens.
  shared: the prompts plus two more copies of the longest, with prefix
         caching and 4-token chunks: the copies, admitted after the original's
         blocks are computed, take them from the prefix cache (shared KV
         blocks) and must produce the original's tokens.
Exit 77 (skipped) without numpy.
"""
import glob
import json
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: numpy is not installed (tests/requirements.txt)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llm_ckpt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# |ours - transformers| <= LOGIT_ATOL + LOGIT_RTOL * |transformers| elementwise
# (FP32 on both sides; differences come from summation order: OpenBLAS
# against torch's GEMMs, double-accumulated attention against FP32 SDPA)
LOGIT_ATOL, LOGIT_RTOL = 2e-4, 1e-4
RUNS = {
    "roomy": ["--step-tokens", "8", "--max-seqs", "8", "--block-tokens", "4", "--blocks", "64"],
    "tight": ["--step-tokens", "6", "--max-seqs", "3", "--max-chunk", "3", "--block-tokens", "2", "--blocks", "16",
              "--prefix-caching"],
    "shared": ["--step-tokens", "8", "--max-seqs", "4", "--max-chunk", "4", "--block-tokens", "4", "--blocks", "64",
               "--prefix-caching"],
}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def run(runner, ckpt, prompts_file, max_new, extra):
    r = subprocess.run([runner, ckpt, prompts_file, "--max-new", str(max_new), "--logits"] + extra,
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return json.loads(r.stdout), None


def check_fixture(runner, work, path):
    fx = json.load(open(path))
    name = fx["name"]
    ckpt = os.path.join(work, name)
    sha = llm_ckpt.write_checkpoint(fx, ckpt)
    if sha != fx["weights_sha256"]:
        fail("%s: numpy drew other weights than when the fixture was made (digest %s, fixture %s): "
             "regenerate the fixtures" % (name, sha[:12], fx["weights_sha256"][:12]))
        return
    longest = max(range(len(fx["prompts"])), key=lambda i: len(fx["prompts"][i]))
    order = list(range(len(fx["prompts"])))
    vocab = fx["config"]["vocab_size"]
    for run_name, extra in RUNS.items():
        idx = order + [longest, longest] if run_name == "shared" else order
        pf = os.path.join(ckpt, "prompts_%s.json" % run_name)
        json.dump({"prompts": [fx["prompts"][i] for i in idx]}, open(pf, "w"))
        out, errmsg = run(runner, ckpt, pf, fx["max_new"], extra)
        if out is None:
            fail("%s/%s: inferd-llm-run failed: %s" % (name, run_name, errmsg))
            continue
        worst, worst_rel = 0.0, 0.0
        for k, got in enumerate(out["tokens"][:len(idx)]):
            i = idx[k]
            want = fx["tokens"][i]
            if want != got:
                fail("%s/%s: prompt %d (%d tokens): tokens %s, transformers %s" %
                     (name, run_name, i, len(fx["prompts"][i]), got, want))
                continue
            ref = fx["logits"][i]
            want_rows = llm_ckpt.unpack_f32(ref["f32"], vocab)
            got_rows = np.asarray(out["logits"][k], dtype=np.float64)
            for row, step in zip(want_rows, ref["steps"]):
                diff = np.abs(got_rows[step] - row)
                worst = max(worst, float(diff.max()))
                worst_rel = max(worst_rel, float(np.linalg.norm(got_rows[step] - row) / np.linalg.norm(row)))
                if np.any(diff > LOGIT_ATOL + LOGIT_RTOL * np.abs(row)):
                    fail("%s/%s: prompt %d step %d: logits off by up to %.3g" % (name, run_name, i, step, diff.max()))
        if len(out["tokens"]) != len(idx):
            fail("%s/%s: %d outputs for %d prompts" % (name, run_name, len(out["tokens"]), len(idx)))
        full = (len(fx["prompts"][longest]) - 1) // 4 * 4  # the tokens of its full blocks but the last token's
        if run_name == "shared" and out["prefix_hit_tokens"] < 2 * full:
            fail("%s/shared: %d prefix-hit tokens; the two copies should each take %d" %
                 (name, out["prefix_hit_tokens"], full))
        if run_name == "roomy" and out["mixed_steps"] == 0:
            fail("%s/roomy: no step mixed prefill chunks with decode tokens" % name)
        if run_name == "tight" and out["preemptions"] == 0:
            fail("%s/tight: nothing was preempted (the pool is meant to be too small)" % name)
        print("%-17s %-5s tokens %s, %d steps (%d mixed), %d preemptions, %d prefix-hit tokens; "
              "max |dlogit| %.2e, max normwise %.2e" %
              (name, run_name, "match" if not failures else "?", out["steps"], out["mixed_steps"],
               out["preemptions"], out["prefix_hit_tokens"], worst, worst_rel))


def expect_refusal(runner, work, base, label, mutate, needles):
    """A copy of checkpoint base changed by mutate(dir) must fail to load with
    every needle in the message."""
    d = os.path.join(work, "bad_" + label)
    fx = json.load(open(base))
    llm_ckpt.write_checkpoint(fx, d)
    mutate(d, fx)
    pf = os.path.join(d, "prompts.json")
    json.dump({"prompts": [[1, 2, 3]]}, open(pf, "w"))
    r = subprocess.run([runner, d, pf, "--max-new", "2"], capture_output=True, text=True, timeout=60)
    if r.returncode == 0:
        fail("bad checkpoint %s loaded" % label)
        return
    for n in needles:
        if n not in r.stderr:
            fail("bad checkpoint %s: %r not in the error: %s" % (label, n, r.stderr.strip()))
    print("refused %-14s %s" % (label, r.stderr.strip()[:300]))


def edit_config(d, change):
    p = os.path.join(d, "config.json")
    c = json.load(open(p))
    change(c)
    json.dump(c, open(p, "w"))


def retensor(d, fx, change):
    """Rewrites the weights after change(list of [name, shape]) (values by llm_ckpt)."""
    tensors = [list(t) for t in fx["tensors"]]
    change(tensors)
    fx2 = dict(fx, tensors=tensors, shards=1)
    llm_ckpt.write_checkpoint(fx2, d)


def check_refusals(runner, work):
    llama = os.path.join(HERE, "fixtures", "llama3_gqa.json")
    gpt2 = os.path.join(HERE, "fixtures", "gpt2.json")
    expect_refusal(runner, work, llama, "arch", lambda d, fx: edit_config(
        d, lambda c: c.update(architectures=["FalconForCausalLM"], model_type="falcon")),
        ["UNIMPLEMENTED", "FalconForCausalLM"])
    expect_refusal(runner, work, llama, "rope_yarn", lambda d, fx: edit_config(
        d, lambda c: (c.pop("rope_parameters", None), c.update(rope_scaling={"rope_type": "yarn", "factor": 4.0},
                                                                 quantization_config={"quant_method": "gptq"}))),
        ["'yarn'", "quantization_config"])
    expect_refusal(runner, work, llama, "config_values", lambda d, fx: edit_config(
        d, lambda c: c.update(num_key_value_heads=3, hidden_size="64")),
        ["hidden_size must be an integer", "num_key_value_heads 3"])

    def bad_tensors(ts):
        for t in ts:
            if t[0] == "model.layers.0.self_attn.k_proj.weight":
                t[1] = [64, 64]  # GQA: the config needs [32, 64]
        ts[:] = [t for t in ts if t[0] != "model.layers.1.mlp.up_proj.weight"]
        ts.append(["model.layers.2.mlp.up_proj.weight", [128, 64]])
    expect_refusal(runner, work, llama, "tensors", lambda d, fx: retensor(d, fx, bad_tensors),
                   ["'model.layers.0.self_attn.k_proj.weight' has shape [64, 64], the config needs [32, 64]",
                    "'model.layers.1.mlp.up_proj.weight' is missing",
                    "'model.layers.2.mlp.up_proj.weight' is not a weight"])
    expect_refusal(runner, work, gpt2, "gpt2_conv1d", lambda d, fx: retensor(d, fx, lambda ts: [
        t.__setitem__(1, [192, 64]) for t in ts if t[0] == "transformer.h.1.attn.c_attn.weight"]),
        ["'transformer.h.1.attn.c_attn.weight' has shape [192, 64], the config needs [64, 192]"])

    def truncate(d, fx):
        p = os.path.join(d, "model.safetensors")
        with open(p, "r+b") as f:
            f.truncate(os.path.getsize(p) - 4)
    expect_refusal(runner, work, gpt2, "truncated", truncate, ["data_offsets outside the file"])


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    runner, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    fixtures = sorted(glob.glob(os.path.join(HERE, "fixtures", "*.json")))
    if not fixtures:
        fail("no fixtures in tests/llm/fixtures")
    for p in fixtures:
        check_fixture(runner, work, p)
    check_refusals(runner, work)
    print("%d fixtures, %d failures" % (len(fixtures), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
