"""tests/gpu/llm_lowp_emulate.py: where test_gpu_llm_step.c's FP16/BF16 bounds
come from. A numpy model of the GPU decoder runner's rounding (every
kernel's and GEMM's output rounded to the checkpoint's type, the math inside
in float, the KV cache in that type) run on the fixture checkpoints next to
the same model in FP32, printing the worst normwise logit error
||lowp - fp32||_2 / ||fp32||_2 over a few random 20-token sequences: the
16-bit fixtures in their own type, the FP32 ones in both FP16 and BF16.

    llm_lowp_emulate.py CKPT_DIR      (checkpoints from tests/llm/write_ckpts.py)

Measured when the bounds were set: gpt2_f16 2.5e-3 (bound 2e-2),
llama2_bf16_tied 2.5e-2 (bound 6e-2); the FP32 fixtures up to 6.5e-3 in
FP16 and 4.0e-2 in BF16. Llama-family RoPE without scaling only (the
llama3_gqa fixture's scaling is left out: it changes no rounding).
"""
import json, sys, os, glob, struct
import numpy as np

def load(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    T = {}
    for f in files:
        b = open(os.path.join(d, f), "rb").read()
        n = struct.unpack("<Q", b[:8])[0]
        h = json.loads(b[8:8 + n]); data = b[8 + n:]
        for k, v in h.items():
            if k == "__metadata__": continue
            s, e = v["data_offsets"]; raw = data[s:e]
            if v["dtype"] == "F32": a = np.frombuffer(raw, "<f4")
            elif v["dtype"] == "F16": a = np.frombuffer(raw, "<f2").astype(np.float32)
            else: a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
            T[k] = a.reshape(v["shape"]).astype(np.float32)
    return T

def rounder(dt):
    if dt == "F32": return lambda x: x.astype(np.float32)
    if dt == "F16": return lambda x: x.astype(np.float16).astype(np.float32)
    def bf(x):
        u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return (u.astype(np.uint32) << 16).view(np.float32)
    return bf

def run(d, toks, dt, window=0):
    c = json.load(open(os.path.join(d, "config.json")))
    W = load(d); R = rounder(dt)
    W = {k: R(v) for k, v in W.items()}
    gpt2 = c["model_type"] == "gpt2"
    n = len(toks); pos = np.arange(n)
    if gpt2:
        H = c["n_embd"]; nh = c["n_head"]; nkv = nh; hd = H // nh; L = c["n_layer"]; eps = c["layer_norm_epsilon"]
        p = "transformer." if "transformer.wte.weight" in W else ""
        x = R(W[p + "wte.weight"][toks] + W[p + "wpe.weight"][pos])
    else:
        H = c["hidden_size"]; nh = c["num_attention_heads"]; nkv = c["num_key_value_heads"]
        hd = c.get("head_dim") or H // nh; L = c["num_hidden_layers"]; eps = c["rms_norm_eps"]
        theta = c.get("rope_parameters", {}).get("rope_theta", c.get("rope_theta", 10000.0))
        inv = (1.0 / theta ** (np.arange(0, hd, 2) / hd)).astype(np.float32)
        x = R(W["model.embed_tokens.weight"][toks])
        window = (c.get("sliding_window") or 0) if c["model_type"] == "mistral" else 0
    def norm(x, w, b=None):
        if gpt2:
            m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
            return R((x - m) / np.sqrt(v + eps) * w + b)
        return R(w * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)))
    def rope(t, nheads):
        t = t.reshape(n, nheads, hd); a, b = t[..., :hd // 2], t[..., hd // 2:]
        ang = (pos[:, None] * inv[None, :]).astype(np.float32)[:, None, :]
        cs, sn = np.cos(ang), np.sin(ang)
        return R(np.concatenate([a * cs - b * sn, b * cs + a * sn], -1).reshape(n, nheads * hd))
    def gelu_tanh(v): return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))
    for l in range(L):
        if gpt2:
            pre = p + "h.%d." % l
            h = norm(x, W[pre + "ln_1.weight"], W[pre + "ln_1.bias"])
            qkv = R(h @ W[pre + "attn.c_attn.weight"] + W[pre + "attn.c_attn.bias"])
            q, k, v = qkv[:, :H], qkv[:, H:2 * H], qkv[:, 2 * H:]
        else:
            pre = "model.layers.%d." % l
            h = norm(x, W[pre + "input_layernorm.weight"])
            def lin(name, xx):
                y = xx @ W[pre + name + ".weight"].T
                if pre + name + ".bias" in W: y = y + W[pre + name + ".bias"]
                return y
            q = R(lin("self_attn.q_proj", h)); k = R(lin("self_attn.k_proj", h)); v = R(lin("self_attn.v_proj", h))
            q = rope(q, nh); k = rope(k, nkv)
        g = nh // nkv
        att = np.zeros((n, nh * hd), np.float32)
        for i in range(n):
            first = max(0, i - window + 1) if window else 0
            for hh in range(nh):
                kk = k[first:i + 1, (hh // g) * hd:(hh // g + 1) * hd]; vv = v[first:i + 1, (hh // g) * hd:(hh // g + 1) * hd]
                s = kk @ q[i, hh * hd:(hh + 1) * hd] / np.sqrt(hd); s = np.exp(s - s.max()); s /= s.sum()
                att[i, hh * hd:(hh + 1) * hd] = s @ vv
        att = R(att)
        if gpt2:
            x = R(x + att @ W[pre + "attn.c_proj.weight"] + W[pre + "attn.c_proj.bias"])
            h = norm(x, W[pre + "ln_2.weight"], W[pre + "ln_2.bias"])
            u = R(h @ W[pre + "mlp.c_fc.weight"] + W[pre + "mlp.c_fc.bias"])
            a = R(gelu_tanh(u))
            x = R(x + a @ W[pre + "mlp.c_proj.weight"] + W[pre + "mlp.c_proj.bias"])
        else:
            x = R(x + lin("self_attn.o_proj", att))
            h = norm(x, W[pre + "post_attention_layernorm.weight"])
            gt = R(lin("mlp.gate_proj", h)); up = R(lin("mlp.up_proj", h))
            act = c.get("hidden_act", "silu")
            ga = gt / (1 + np.exp(-gt)) if act == "silu" else gelu_tanh(gt)
            a = R(ga * up)
            x = R(x + lin("mlp.down_proj", a))
    if gpt2:
        h = norm(x, W[p + "ln_f.weight"], W[p + "ln_f.bias"]); lm = W.get("lm_head.weight", W[p + "wte.weight"])
    else:
        h = norm(x, W["model.norm.weight"]); lm = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return R(h @ lm.T)

root = sys.argv[1]
rng = np.random.default_rng(1)
for name in sorted(os.listdir(root)):
    d = os.path.join(root, name); c = json.load(open(os.path.join(d, "config.json")))
    V = c["vocab_size"]
    dt = "BF16" if "bf16" in name else "F16" if "f16" in name else None
    worst = {}
    for trial in range(4):
        toks = rng.integers(0, V, 20)
        ref = run(d, toks, "F32")
        for emu in ([dt] if dt else ["F16", "BF16"]):
            lo = run(d, toks, emu)
            rel = np.sqrt(((lo - ref) ** 2).sum(-1) / (ref ** 2).sum(-1))
            worst[emu] = max(worst.get(emu, 0), rel.max())
    print(name, {k: "%.3g" % v for k, v in worst.items()})
