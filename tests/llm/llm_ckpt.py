"""tests/llm/llm_ckpt.py: tiny random-weight Hugging Face checkpoints written
with numpy alone, so CI rebuilds the test checkpoints without torch.

The weights are a pure function of (seed, tensor name, shape): numpy's PCG64
normal draws in float32, scaled per kind of tensor. make_llm_fixtures.py
loads the same weights into transformers to record the reference tokens;
check_llm_greedy.py rebuilds the checkpoint from the fixture and compares.
A digest of the weights is stored with the fixture, so a numpy that ever drew
differently fails loudly as that, not as a token mismatch.
"""
import base64
import hashlib
import json
import os
import struct
import zlib

import numpy as np


def tensor_values(seed, name, shape):
    """The FP32 values of one tensor."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    x = rng.standard_normal(tuple(shape), dtype=np.float32)
    if len(shape) == 1:
        if name.endswith("bias"):
            return (x * np.float32(0.05)).astype(np.float32)
        return (np.float32(1.0) + x * np.float32(0.1)).astype(np.float32)  # norm scales around 1
    # embeddings small beside the layers' updates (weights large for their
    # width): else the residual stream stays the input's embedding and a
    # model repeats its last token, which tests nothing
    if "embed_tokens" in name or name.endswith(("wte.weight", "wpe.weight")):
        return (x * np.float32(0.3)).astype(np.float32)
    return (x * np.float32(0.2)).astype(np.float32)


def pack_f32(rows):
    """Logit rows as base64 of little-endian float32 (exact, compact)."""
    return base64.b64encode(np.asarray(rows, dtype="<f4").tobytes()).decode()


def unpack_f32(s, width):
    return np.frombuffer(base64.b64decode(s), dtype="<f4").reshape(-1, width)


def round_to(x, dtype):
    """x (float32) rounded to BF16 or F16 and back, as the checkpoint stores it."""
    if dtype == "F32":
        return x
    if dtype == "F16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "BF16":
        u = x.view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even
        return (u.astype(np.uint32) << 16).view(np.float32)
    raise ValueError(dtype)


def encode(x, dtype):
    if dtype == "F32":
        return x.astype("<f4").tobytes()
    if dtype == "F16":
        return x.astype("<f2").tobytes()
    if dtype == "BF16":
        return (round_to(x, "BF16").view(np.uint32) >> 16).astype("<u2").tobytes()
    raise ValueError(dtype)


def all_values(fx):
    """{name: float32 array} for a fixture's tensors, rounded to its dtype."""
    return {n: round_to(tensor_values(fx["seed"], n, s), fx["dtype"]) for n, s in fx["tensors"]}


def digest(values):
    h = hashlib.sha256()
    for n in sorted(values):
        h.update(n.encode())
        h.update(values[n].astype("<f4").tobytes())
    return h.hexdigest()


def write_safetensors(path, items, dtype):
    """items: [(name, float32 array)]; the safetensors layout by hand (8-byte
    header length, JSON header, data), so no package is needed."""
    header, blobs, off = {}, [], 0
    for n, x in items:
        b = encode(x, dtype)
        header[n] = {"dtype": dtype, "shape": list(x.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_checkpoint(fx, out):
    """The checkpoint folder of fixture fx in out (config, generation config,
    weights in one file or fx["shards"] files with an index). Returns the
    weights' digest."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(fx["config"], f, indent=2)
    if fx.get("generation_config") is not None:
        with open(os.path.join(out, "generation_config.json"), "w") as f:
            json.dump(fx["generation_config"], f, indent=2)
    values = all_values(fx)
    names = [n for n, _ in fx["tensors"]]
    shards = fx.get("shards", 1)
    for stale in os.listdir(out):
        if stale.startswith("model") and stale.endswith((".safetensors", ".index.json")):
            os.remove(os.path.join(out, stale))
    if shards == 1:
        write_safetensors(os.path.join(out, "model.safetensors"), [(n, values[n]) for n in names], fx["dtype"])
    else:
        per = -(-len(names) // shards)
        wmap = {}
        for k in range(shards):
            fn = "model-%05d-of-%05d.safetensors" % (k + 1, shards)
            part = names[k * per:(k + 1) * per]
            write_safetensors(os.path.join(out, fn), [(n, values[n]) for n in part], fx["dtype"])
            wmap.update({n: fn for n in part})
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": wmap}, f, indent=2)
    return digest(values)
