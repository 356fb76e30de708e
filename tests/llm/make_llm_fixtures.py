"""tests/llm/make_llm_fixtures.py: records transformers' greedy tokens and
logits for tiny random-weight decoder checkpoints (tests/llm/fixtures/*.json).

Needs torch and transformers (not in tests/requirements.txt: a torch wheel
from PyPI with its CUDA libraries is gigabytes, too heavy for CI's install;
CI reads the committed fixtures and rebuilds the weights with numpy alone,
llm_ckpt.py). Run it again when a case changes:

    python tests/llm/make_llm_fixtures.py [--runner build/bin/inferd-llm-run]

With --runner it also runs inferd-llm-run on the folder transformers'
save_pretrained wrote itself (its exact tensor names and layout), not only
on the numpy rebuild.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
    import transformers
    from safetensors import safe_open
except ImportError as e:
    print("skipped: make_llm_fixtures.py needs torch, transformers and safetensors "
          "(tests/llm/requirements-fixtures.txt): %s" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llm_ckpt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EOS = 255
COMMON = dict(vocab_size=256, bos_token_id=1, eos_token_id=EOS, pad_token_id=0)
LLAMA = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=128, rms_norm_eps=1e-5, **COMMON)

CASES = {
    # GQA (4 query heads over 2 KV heads) and Llama 3.1's rope scaling with a
    # short original context, so every regime of the scaling is used
    "llama3_gqa": dict(cls="LlamaConfig", dtype="F32", kw=dict(
        LLAMA, num_key_value_heads=2, rope_theta=500000.0,
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=16))),
    # Llama 2 shape (MHA), tied embeddings, stored in BF16 over two shards
    "llama2_bf16_tied": dict(cls="LlamaConfig", dtype="BF16", shards=2, kw=dict(
        LLAMA, num_key_value_heads=4, tie_word_embeddings=True)),
    # every projection with a bias (attention_bias, mlp_bias) and a GELU-gated MLP (GeGLU)
    "llama_bias_geglu": dict(cls="LlamaConfig", dtype="F32", kw=dict(
        LLAMA, num_key_value_heads=2, attention_bias=True, mlp_bias=True, hidden_act="gelu_pytorch_tanh")),
    # biases on q, k, v
    "qwen2": dict(cls="Qwen2Config", dtype="F32", kw=dict(LLAMA, num_key_value_heads=2, rope_theta=1000000.0,
                                                         use_sliding_window=False)),
    # a sliding window shorter than the longer prompts
    "mistral_window": dict(cls="MistralConfig", dtype="F32", kw=dict(LLAMA, num_key_value_heads=2, sliding_window=8)),
    "gpt2": dict(cls="GPT2Config", dtype="F32", kw=dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, **COMMON)),
    "gpt2_f16": dict(cls="GPT2Config", dtype="F16", kw=dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, **COMMON)),
}
SEED = 35
MAX_NEW = 12
MIN_MARGIN = 2e-3  # the top two logits of every reference step at least this apart
LOGIT_STEPS = (0, 1, -1)  # the steps whose logits are kept (first two and last)
PROMPT_LENS = [3, 9, 17, 6, 1]


def prompts():
    rng = np.random.default_rng(7)
    return [[int(t) for t in rng.integers(2, 250, n)] for n in PROMPT_LENS]


def make_case(name, case, runner):
    """Tries seeds from SEED until every step's top-2 margin is at least
    MIN_MARGIN (a near-tie could flip on a last-bit difference) and every
    output has 4 distinct tokens (not a degenerate repeat)."""
    for seed in range(SEED, SEED + 20):
        fx = make_seed(name, case, runner, seed)
        if fx["min_top2_margin"] >= MIN_MARGIN and min(len(set(t)) for t in fx["tokens"]) >= 4:
            return fx
        print("  %s: seed %d rejected (margin %.3g, distinct %s)" % (name, seed, fx["min_top2_margin"],
                                                                    [len(set(t)) for t in fx["tokens"]]))
    raise SystemExit("%s: no seed gives clear greedy margins" % name)


def make_seed(name, case, runner, seed):
    config = getattr(transformers, case["cls"])(**case["kw"])
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config).float().eval()
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        shapes = {}
        for fn in sorted(os.listdir(tmp)):
            if fn.endswith(".safetensors"):
                with safe_open(os.path.join(tmp, fn), "np") as f:
                    for k in f.keys():
                        shapes[k] = list(f.get_slice(k).get_shape())
        tensors = sorted(shapes.items())
        fx = dict(name=name, transformers=transformers.__version__, torch=torch.__version__, seed=seed,
                  dtype=case["dtype"], shards=case.get("shards", 1), tensors=tensors)
        values = llm_ckpt.all_values(fx)
        sd = {k: torch.from_numpy(v) for k, v in values.items()}
        missing, unexpected = model.load_state_dict(sd, strict=False)
        # tied lm_head.weight is not saved; every other parameter must come from the file
        assert not unexpected and all(m == "lm_head.weight" for m in missing), (missing, unexpected)
        if case["kw"].get("tie_word_embeddings") or case["cls"] == "GPT2Config":
            model.tie_weights()
        model.save_pretrained(tmp, safe_serialization=True)  # the real save, with our weights
        with open(os.path.join(tmp, "config.json")) as f:
            fx["config"] = json.load(f)
        gp = os.path.join(tmp, "generation_config.json")
        fx["generation_config"] = json.load(open(gp)) if os.path.exists(gp) else None
        fx["weights_sha256"] = llm_ckpt.digest(values)
        fx["prompts"] = prompts()
        fx["max_new"] = MAX_NEW
        toks, logits, margin = [], [], float("inf")
        with torch.no_grad():
            for p in fx["prompts"]:
                ids = torch.tensor([p])
                out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_NEW,
                                     do_sample=False, output_logits=True, return_dict_in_generate=True,
                                     pad_token_id=0)
                gen = out.sequences[0, len(p):].tolist()
                lg = [l[0].float().numpy() for l in out.logits][:len(gen)]
                for row in lg:
                    top = np.sort(row)[-2:]
                    margin = min(margin, float(top[1] - top[0]))
                toks.append(gen)
                keep = sorted({s % len(lg) for s in LOGIT_STEPS})
                logits.append({"steps": keep, "f32": llm_ckpt.pack_f32([lg[s] for s in keep])})
        fx["tokens"], fx["logits"], fx["min_top2_margin"] = toks, logits, margin
        if runner:
            pf = os.path.join(tmp, "prompts.json")
            json.dump({"prompts": fx["prompts"]}, open(pf, "w"))
            r = subprocess.run([runner, tmp, pf, "--max-new", str(MAX_NEW), "--step-tokens", "8"],
                               capture_output=True, text=True)
            got = json.loads(r.stdout)["tokens"] if r.returncode == 0 else r.stderr
            if got != toks:
                print(r.stderr)
            print("  %s: inferd-llm-run on transformers' own save: %s" % (name, "match" if got == toks else got))
    return fx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", help="inferd-llm-run, to also run on transformers' own saved folders")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    os.makedirs(os.path.join(HERE, "fixtures"), exist_ok=True)
    for name, case in CASES.items():
        if a.only and name not in a.only:
            continue
        fx = make_case(name, case, a.runner)
        with open(os.path.join(HERE, "fixtures", name + ".json"), "w") as f:
            json.dump(fx, f, separators=(",", ":"))
        print("%s: tokens %s, min top-2 margin %.4g" % (name, [len(t) for t in fx["tokens"]], fx["min_top2_margin"]))


if __name__ == "__main__":
    main()
