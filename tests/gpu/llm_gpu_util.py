"""tests/gpu/llm_gpu_util.py: what the GPU LLM scripts share (tests/gpu/llm_serve_gpu.py,
tests/bench/llm/llm_gpu_bench.py, tests/gpu/llm_storm.py): an inferd process over a model repository,
Triton's generate extension over plain HTTP (urllib / http.client: no tritonclient on the device machine), a
model folder's config.pbtxt, and random-weight Hugging Face checkpoints saved with transformers. (Streams are
timed by `inferd-load generate`, not here: a Python reader of 256 streams takes their events in bursts.)

Standard library only at import; torch and transformers are imported by the functions that need them.
"""
import http.client
import json
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request

READY_RE = re.compile(r"inferd ready: grpc=(\d+) http=(\d+)")


def log(*a):
    print(*a, flush=True)


# --- the server

class Server:
    """inferd on ports it picks (--grpc-port 0 --http-port 0); stderr copied to log_path."""

    def __init__(self, binary, repo, log_path, extra=()):
        self.args = [binary, "--model-repository", repo, "--grpc-port", "0", "--http-port", "0",
                     "--log-level", "info"] + list(extra)
        self.log_path = log_path
        self.port = self.grpc_port = None  # HTTP's, gRPC's
        self.proc = None
        self._ready = threading.Event()
        self.lines = []

    def start(self, timeout=180):
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace")
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(timeout) or self.port is None:
            self.stop()
            raise RuntimeError("inferd did not become ready within %d s (exit %s); log tail:\n%s"
                               % (timeout, self.proc.poll(), self.tail()))
        return self

    def _read(self):
        with open(self.log_path, "w") as f:
            for line in self.proc.stderr:
                f.write(line)
                f.flush()
                self.lines.append(line.rstrip("\n"))
                m = READY_RE.search(line)
                if m and not self._ready.is_set():
                    self.port, self.grpc_port = int(m.group(2)), int(m.group(1))
                    self._ready.set()
        self._ready.set()

    def tail(self, n=40):
        return "\n".join(self.lines[-n:])

    def grep(self, word):
        return [l for l in self.lines if word in l]

    def stop(self, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def model_ready(self, name):
        try:
            with urllib.request.urlopen(self.url("/v2/models/%s/ready" % name), timeout=10) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_models(self, names, timeout=120):
        """Every model ready, or the reasons the others are not (from the repository index and the log)."""
        t0 = time.time()
        left = list(names)
        while left and time.time() - t0 < timeout:
            left = [n for n in left if not self.model_ready(n)]
            if left:
                time.sleep(0.5)
        if left:
            why = ""
            try:
                req = urllib.request.Request(self.url("/v2/repository/index"), data=b"{}", method="POST")
                with urllib.request.urlopen(req, timeout=10) as r:
                    why = r.read().decode()
            except Exception as e:  # noqa: BLE001 (only for the message)
                why = str(e)
            raise RuntimeError("models not ready: %s\nrepository index: %s\nlog lines naming them:\n%s"
                               % (left, why, "\n".join(l for l in self.lines if any(n in l for n in left))))

    def metrics(self):
        with urllib.request.urlopen(self.url("/metrics"), timeout=10) as r:
            return r.read().decode()


def generate(srv, model, body, timeout=300):
    """POST /v2/models/{model}/generate; returns (status, parsed JSON or the raw text)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    try:
        conn.request("POST", "/v2/models/%s/generate" % model, json.dumps(body),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read().decode()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data
    finally:
        conn.close()


def write_config(model_dir, params, gpus=(0,), count=1, kind="KIND_GPU"):
    os.makedirs(model_dir, exist_ok=True)
    text = 'backend: "inferd_llm"\nmax_batch_size: 0\n'
    for k, v in params.items():
        text += 'parameters { key: "%s" value { string_value: "%s" } }\n' % (k, v)
    g = (" gpus: [ %s ]" % ", ".join(str(x) for x in gpus)) if gpus else ""
    text += "instance_group [ { count: %d kind: %s%s } ]\n" % (count, kind, g)
    with open(os.path.join(model_dir, "config.pbtxt"), "w") as f:
        f.write(text)


# --- checkpoints

def no_eos(cfg):
    """Generation never stops at an end token: transformers' generate() and inferd both run to the length."""
    for k in ("eos_token_id", "bos_token_id", "pad_token_id"):
        if hasattr(cfg, k):
            setattr(cfg, k, None)
    return cfg


def tiny_config(family, vocab=1024, hidden=256, layers=4, heads=8, kv_heads=2, inter=704, max_pos=1024):
    import transformers as tf
    common = dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  intermediate_size=inter, max_position_embeddings=max_pos, initializer_range=0.05,
                  tie_word_embeddings=False)
    if family == "llama":
        c = tf.LlamaConfig(num_key_value_heads=kv_heads, **common)
    elif family == "qwen2":
        c = tf.Qwen2Config(num_key_value_heads=kv_heads, use_sliding_window=False,
                           sliding_window=None, **common)
    elif family == "mistral":
        c = tf.MistralConfig(num_key_value_heads=kv_heads, sliding_window=None, **common)
    elif family == "gpt2":
        c = tf.GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=heads, n_inner=4 * hidden,
                          n_positions=max_pos, activation_function="gelu_new", initializer_range=0.05,
                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    else:
        raise ValueError(family)
    return no_eos(c)


def save_model(cfg, out_dir, seed, dtype="float32", device="cuda"):
    """A random-weight model of cfg (seeded), saved in dtype with transformers (model.safetensors)."""
    import torch
    import transformers as tf
    torch.manual_seed(seed)
    dt = getattr(torch, dtype)
    with torch.device(device):
        m = tf.AutoModelForCausalLM.from_config(cfg)
    m = m.to(dt)
    m.generation_config.eos_token_id = None
    m.generation_config.bos_token_id = None
    m.generation_config.pad_token_id = None
    m.save_pretrained(out_dir)  # safetensors, transformers' default
    del m
    if device == "cuda":
        torch.cuda.empty_cache()
    # drop generation_config.json's end tokens if transformers wrote any
    g = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(g):
        j = json.load(open(g))
        for k in ("eos_token_id", "bos_token_id", "pad_token_id"):
            j.pop(k, None)
        json.dump(j, open(g, "w"), indent=2)
    return out_dir


def pctl(xs, p):
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]
