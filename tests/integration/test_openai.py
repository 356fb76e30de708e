"""Text in, text out through the real server (issue 36): a generative model whose checkpoint has a tokenizer
(tokenizer.json) and a chat template, driven with the official `openai` Python client and with curl on
/v1/models, /v1/completions and /v1/chat/completions (plain and streamed as OpenAI streams), with Triton's
generate extension taking text_input, and with ModelStreamInfer carrying Triton's vLLM-backend tensors.

What must hold: the greedy text is transformers' (tests/llm/text_fixtures/openai_qwen2.json, made offline by
tests/llm/make_openai_fixture.py: a tiny random Qwen2 over the qwen2 test tokenizer with Qwen2.5's chat
template); streamed deltas add up to it; stop strings cut it and say "stop"; usage counts tokens; every bad
request gets OpenAI's error shape, its status and a message saying why; a model without a tokenizer refuses
text and still takes token ids; a broken tokenizer fails its model's load; a client that leaves mid-stream
frees its sequence's KV blocks at once while another stream goes on."""

import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse

import numpy as np
import pytest

import inferd_testlib as lib

openai = pytest.importorskip("openai")

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "llm"))
import llm_ckpt  # noqa: E402

LLM = os.path.join(lib.REPO_ROOT, "tests", "llm")
WAIT_S = 60
with open(os.path.join(LLM, "text_fixtures", "openai_qwen2.json")) as f:
    FX = json.load(f)
MAX_NEW = FX["max_new"]
MAX_CTX = FX["config"]["max_position_embeddings"]


def write_tokenizer(d):
    shutil.copy(os.path.join(LLM, "tok", "fixtures", "qwen2", "tokenizer.json"), os.path.join(d, "tokenizer.json"))
    with open(os.path.join(LLM, "tok", "fixtures", "qwen2", "tokenizer_config.json")) as f:
        c = json.load(f)
    with open(os.path.join(LLM, "chat", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")) as f:
        c["chat_template"] = f.read()
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(c, f)


def add_model(repo, name, fx, params, tokenizer=True):
    d = os.path.join(repo, name)
    llm_ckpt.write_checkpoint(fx, os.path.join(d, "1"))
    if tokenizer:
        write_tokenizer(os.path.join(d, "1"))
    text = 'backend: "inferd_llm"\nmax_batch_size: 0\n'
    for k, v in params.items():
        text += 'parameters { key: "%s" value { string_value: "%s" } }\n' % (k, v)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(text)
    return os.path.join(d, "1")


def slow_fixture():
    """The same vocabulary and tokenizer in a Qwen2 big enough (~10 M weights) that a decode step takes
    milliseconds, with a context of 4096: a long answer lasts seconds, so a client can leave mid-stream."""
    fx = dict(FX)
    c = dict(fx["config"])
    H, I, L, V, NH, NKV, HD = 512, 1024, 4, c["vocab_size"], 8, 2, 64
    c.update(hidden_size=H, intermediate_size=I, num_hidden_layers=L, num_attention_heads=NH,
             num_key_value_heads=NKV, head_dim=HD, max_position_embeddings=4096,
             layer_types=["full_attention"] * L)
    t = [["lm_head.weight", [V, H]], ["model.embed_tokens.weight", [V, H]], ["model.norm.weight", [H]]]
    for i in range(L):
        p = "model.layers.%d." % i
        t += [[p + "input_layernorm.weight", [H]], [p + "post_attention_layernorm.weight", [H]],
              [p + "self_attn.q_proj.weight", [NH * HD, H]], [p + "self_attn.q_proj.bias", [NH * HD]],
              [p + "self_attn.k_proj.weight", [NKV * HD, H]], [p + "self_attn.k_proj.bias", [NKV * HD]],
              [p + "self_attn.v_proj.weight", [NKV * HD, H]], [p + "self_attn.v_proj.bias", [NKV * HD]],
              [p + "self_attn.o_proj.weight", [H, NH * HD]],
              [p + "mlp.gate_proj.weight", [I, H]], [p + "mlp.up_proj.weight", [I, H]],
              [p + "mlp.down_proj.weight", [H, I]]]
    fx.update(config=c, tensors=t, dtype="BF16", shards=1)
    return fx


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("openai_repo"))
    add_model(d, "tiny", FX, {"kv_block_tokens": 4, "kv_cache_blocks": 128})
    add_model(d, "slow_text", slow_fixture(), {"kv_block_tokens": 16, "kv_cache_blocks": 600})
    # the same weights without a tokenizer: token ids only
    add_model(d, "no_tok", FX, {"kv_block_tokens": 4, "kv_cache_blocks": 64}, tokenizer=False)
    # a tokenizer without a chat template: completions only
    ck = add_model(d, "no_template", FX, {"kv_block_tokens": 4, "kv_cache_blocks": 64})
    with open(os.path.join(ck, "tokenizer_config.json")) as f:
        c = json.load(f)
    del c["chat_template"]
    with open(os.path.join(ck, "tokenizer_config.json"), "w") as f:
        json.dump(c, f)
    # a broken tokenizer.json fails that model's load, saying why
    ck = add_model(d, "bad_tok", FX, {"kv_block_tokens": 4, "kv_cache_blocks": 64})
    with open(os.path.join(ck, "tokenizer.json"), "w") as f:
        f.write('{"model": {"type": "Unigram", "vocab": []}}')
    # a chat template outside the Jinja subset fails the load too
    ck = add_model(d, "bad_template", FX, {"kv_block_tokens": 4, "kv_cache_blocks": 64})
    with open(os.path.join(ck, "tokenizer_config.json")) as f:
        c = json.load(f)
    c["chat_template"] = "{% for m in messages %}{{ m.content "
    with open(os.path.join(ck, "tokenizer_config.json"), "w") as f:
        json.dump(c, f)
    # both broken: one load error names both
    ck = add_model(d, "both_bad", FX, {"kv_block_tokens": 4, "kv_cache_blocks": 64})
    with open(os.path.join(ck, "tokenizer.json"), "w") as f:
        f.write("{not json")
    with open(os.path.join(ck, "tokenizer_config.json"), "w") as f:
        json.dump(c, f)
    # a tokenizer of another model: its ids go past this one's 256
    small = json.load(open(os.path.join(LLM, "fixtures", "gpt2.json")))
    add_model(d, "wrong_vocab", small, {"kv_block_tokens": 4, "kv_cache_blocks": 64})
    return d


@pytest.fixture(scope="module")
def srv(repo):
    yield from lib.served(repo, ["--strict-readiness", "false"])


@pytest.fixture
def oc(srv):
    c = openai.OpenAI(base_url=srv.http_url + "/v1", api_key="unused", max_retries=0, timeout=WAIT_S)
    yield c
    c.close()


def metric(srv, name, model):
    return lib.metric_sum(lib.scrape_metrics(srv), name, model=model)


def await_metric(srv, name, model, pred, timeout=WAIT_S):
    t_end = time.monotonic() + timeout
    while True:
        v = metric(srv, name, model)
        if pred(v):
            return v
        assert time.monotonic() < t_end, "%s{model=%s} stayed %s" % (name, model, v)
        time.sleep(0.02)


def post(srv, path, body, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    st, hdr, out = lib.http_call(srv, "POST", path, data, {"Content-Type": "application/json"})
    return st, hdr, out


def sse(data):
    """The data: payloads of an SSE body, in order ('[DONE]' kept as the string)."""
    text = data.decode() if isinstance(data, bytes) else data
    assert text.endswith("\n\n"), text[-200:]
    out = []
    for block in text.split("\n\n")[:-1]:
        assert block.startswith("data: ") and "\n" not in block, block
        p = block[len("data: "):]
        out.append(p if p == "[DONE]" else json.loads(p))
    return out


def openai_error(st, data, status, *parts, param=None):
    assert st == status, (st, data)
    err = json.loads(data)["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert err["type"] == ("invalid_request_error" if status < 500 else "server_error")
    for p in parts:
        assert p in err["message"], (p, err["message"])
    if param is not None:
        assert err["param"] == param, err
    return err


# --- the openai client


def test_models_list(oc):
    ids = {m.id for m in oc.models.list().data}
    assert {"tiny", "slow_text", "no_tok"} <= ids
    assert "bad_tok" not in ids  # not loaded


@pytest.mark.parametrize("k", range(len(FX["completions"])))
def test_completion_greedy_equals_transformers(oc, k):
    c = FX["completions"][k]
    r = oc.completions.create(model="tiny", prompt=c["prompt"], max_tokens=MAX_NEW, temperature=0)
    assert r.object == "text_completion" and r.id.startswith("cmpl-") and r.model == "tiny"
    assert abs(r.created - time.time()) < 60
    assert len(r.choices) == 1 and r.choices[0].index == 0
    assert r.choices[0].text == c["text"]
    assert r.choices[0].finish_reason == c["finish_reason"]
    assert r.usage.prompt_tokens == len(c["prompt_ids"])
    assert r.usage.completion_tokens == c["completion_tokens"]
    assert r.usage.total_tokens == len(c["prompt_ids"]) + c["completion_tokens"]


def test_completion_prompt_as_token_ids(oc):
    c = FX["completions"][0]
    r = oc.completions.create(model="tiny", prompt=c["prompt_ids"], max_tokens=MAX_NEW, temperature=0)
    assert r.choices[0].text == c["text"] and r.usage.prompt_tokens == len(c["prompt_ids"])
    r = oc.completions.create(model="tiny", prompt=[c["prompt"]], max_tokens=MAX_NEW, temperature=0)
    assert r.choices[0].text == c["text"]


@pytest.mark.parametrize("k", range(len(FX["completions"])))
def test_completion_stream(oc, k):
    c = FX["completions"][k]
    chunks = list(oc.completions.create(model="tiny", prompt=c["prompt"], max_tokens=MAX_NEW, temperature=0,
                                        stream=True, stream_options={"include_usage": True}))
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage.completion_tokens == c["completion_tokens"]
    assert usage.usage.prompt_tokens == len(c["prompt_ids"])
    body = chunks[:-1]
    assert all(ch.object == "text_completion" and ch.id == body[0].id for ch in body)
    assert all(ch.usage is None for ch in body)
    assert "".join(ch.choices[0].text for ch in body) == c["text"]
    assert [ch.choices[0].finish_reason for ch in body] == [None] * (len(body) - 1) + [c["finish_reason"]]
    assert len(body) >= 3  # streamed, not one lump


@pytest.mark.parametrize("k", range(len(FX["chats"])))
def test_chat_greedy_equals_transformers(oc, k):
    c = FX["chats"][k]
    r = oc.chat.completions.create(model="tiny", messages=c["messages"], max_tokens=MAX_NEW, temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    m = r.choices[0].message
    assert m.role == "assistant" and m.content == c["text"]
    assert r.choices[0].finish_reason == c["finish_reason"]
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(c["prompt_ids"]), c["completion_tokens"])


@pytest.mark.parametrize("k", range(len(FX["chats"])))
def test_chat_stream(oc, k):
    c = FX["chats"][k]
    chunks = list(oc.chat.completions.create(model="tiny", messages=c["messages"], max_completion_tokens=MAX_NEW,
                                             temperature=0, stream=True))
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    assert all(ch.choices[0].delta.role is None for ch in chunks[1:])
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == c["text"]
    assert chunks[-1].choices[0].finish_reason == c["finish_reason"]
    assert chunks[-1].choices[0].delta.content is None
    assert all(ch.choices[0].finish_reason is None for ch in chunks[:-1])


def test_chat_content_parts(oc):
    c = FX["chats"][0]
    msgs = [{"role": "user", "content": [{"type": "text", "text": c["messages"][0]["content"]}]}]
    r = oc.chat.completions.create(model="tiny", messages=msgs, max_tokens=MAX_NEW, temperature=0)
    assert r.choices[0].message.content == c["text"]


def stop_case():
    """A completion's text and a stop string from its middle (its first occurrence cut there)."""
    c = FX["completions"][0]
    text = c["text"]
    for i in range(len(text) // 3, len(text) - 2):
        s = text[i:i + 2]
        if "\ufffd" not in s and s.strip() == s and s.strip():
            return c, s, text[:text.find(s)]
    raise AssertionError("no stop string in %r" % text)


def test_stop_strings(oc):
    c, stop, want = stop_case()
    r = oc.completions.create(model="tiny", prompt=c["prompt"], max_tokens=MAX_NEW, temperature=0,
                              stop=[stop, "never-in-the-text"])
    assert r.choices[0].text == want and r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens < c["completion_tokens"]
    chunks = list(oc.completions.create(model="tiny", prompt=c["prompt"], max_tokens=MAX_NEW, temperature=0,
                                        stop=stop, stream=True))
    assert "".join(ch.choices[0].text for ch in chunks) == want
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_seeded_sampling_reproduces(oc):
    kw = dict(model="tiny", prompt=FX["completions"][1]["prompt"], max_tokens=MAX_NEW, temperature=1.0, seed=11)
    a = oc.completions.create(**kw).choices[0].text
    b = oc.completions.create(**kw).choices[0].text
    assert a == b
    others = {oc.completions.create(**dict(kw, seed=s)).choices[0].text for s in range(12, 16)}
    assert len(others | {a}) > 1  # the seed matters


# --- curl


def curl(srv, path, body):
    r = subprocess.run(["curl", "-sS", "-N", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
                        "-d", json.dumps(body), srv.http_url + path], capture_output=True, timeout=WAIT_S)
    assert r.returncode == 0, r.stderr
    out, _, code = r.stdout.rpartition(b"\n")
    return int(code), out


def test_curl(srv):
    c = FX["chats"][1]
    st, out = curl(srv, "/v1/chat/completions", {"model": "tiny", "messages": c["messages"], "max_tokens": MAX_NEW,
                                                  "temperature": 0})
    assert st == 200
    assert json.loads(out)["choices"][0]["message"]["content"] == c["text"]
    st, out = curl(srv, "/v1/chat/completions", {"model": "tiny", "messages": c["messages"], "max_tokens": MAX_NEW,
                                                  "temperature": 0, "stream": True,
                                                  "stream_options": {"include_usage": True}})
    assert st == 200
    ev = sse(out)
    assert ev[-1] == "[DONE]"
    assert ev[-2]["choices"] == [] and ev[-2]["usage"]["total_tokens"] == len(c["prompt_ids"]) + c["completion_tokens"]
    assert ev[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert ev[-3]["choices"][0]["delta"] == {} and ev[-3]["choices"][0]["finish_reason"] == c["finish_reason"]
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in ev[:-2]) == c["text"]
    r = subprocess.run(["curl", "-sS", srv.http_url + "/v1/models"], capture_output=True, timeout=WAIT_S)
    assert json.loads(r.stdout)["object"] == "list"


# --- Triton's generate extension with text


def test_generate_text_input(srv):
    c = FX["completions"][2]
    st, _, data = post(srv, "/v2/models/tiny/generate",
                       {"text_input": c["prompt"], "parameters": {"max_tokens": MAX_NEW, "temperature": 0}})
    assert st == 200, data
    r = json.loads(data)
    assert r["text_output"] == c["prompt"] + c["text"]  # the vLLM backend's default: the prompt comes back first
    assert r["model_name"] == "tiny"
    st, _, data = post(srv, "/v2/models/tiny/generate",
                       {"text_input": c["prompt"], "exclude_input_in_output": True, "max_tokens": MAX_NEW,
                        "temperature": 0})
    assert json.loads(data)["text_output"] == c["text"]
    st, _, data = post(srv, "/v2/models/tiny/generate_stream",
                       {"text_input": c["prompt"], "parameters": {"max_tokens": MAX_NEW, "temperature": 0,
                                                                  "stream": True}})
    assert st == 200, data
    ev = sse(data)
    assert "".join(e["text_output"] for e in ev) == c["text"] and len(ev) >= 3
    assert ev[-1]["finish_reason"] == c["finish_reason"]
    # stop strings, vLLM's way
    cc, stop, want = stop_case()
    st, _, data = post(srv, "/v2/models/tiny/generate",
                       {"text_input": cc["prompt"], "parameters": {"max_tokens": MAX_NEW, "temperature": 0,
                                                                   "stop": [stop], "exclude_input_in_output": True}})
    assert json.loads(data)["text_output"] == want


def test_generate_text_errors(srv):
    st, _, data = post(srv, "/v2/models/no_tok/generate", {"text_input": "hi"})
    assert st == 400 and "has no tokenizer" in lib.rest_error(data)
    st, _, data = post(srv, "/v2/models/tiny/generate", {"text_input": 5})
    assert st == 400 and "'text_input' is a string" in lib.rest_error(data)
    st, _, data = post(srv, "/v2/models/tiny/generate", {"text_input": "hi", "parameters": {"warp": 1}})
    assert st == 400 and "unknown sampling parameter 'warp'" in lib.rest_error(data)
    st, _, data = post(srv, "/v2/models/tiny/generate_stream",
                       {"text_input": "hi", "stream": True, "exclude_input_in_output": False})
    assert st == 400 and "exclude_input_in_output" in lib.rest_error(data)
    st, _, data = post(srv, "/v2/models/tiny/generate", {"text_input": "hi", "input_ids": [1]})
    assert st == 400 and "not both" in lib.rest_error(data)
    # the token-id form still works on both
    for m in ("tiny", "no_tok"):
        c = FX["completions"][0]
        st, _, data = post(srv, "/v2/models/%s/generate" % m, {"input_ids": c["prompt_ids"],
                                                               "request_output_len": MAX_NEW})
        assert st == 200, data
        assert json.loads(data)["output_ids"] == c["ids"]


# --- bad requests, OpenAI's way


def test_bad_requests(srv):
    base = {"model": "tiny", "prompt": "hi", "max_tokens": 4}
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    cases = [
        ("/v1/completions", dict(base, warp_speed=9), 400, ["Unrecognized request argument supplied: warp_speed"],
         "warp_speed"),
        ("/v1/completions", dict(base, n=2), 400, ["'n' must be 1"], "n"),
        ("/v1/completions", dict(base, logprobs=21), 400, ["'logprobs' is an integer between 0 and 20"], "logprobs"),
        ("/v1/chat/completions", dict(chat, top_logprobs=2), 400, ["'logprobs' must be true"], "top_logprobs"),
        ("/v1/chat/completions", dict(chat, logprobs=1), 400, ["'logprobs' is a boolean"], "logprobs"),
        ("/v1/completions", dict(base, echo=True), 400, ["'echo' is not supported"], "echo"),
        ("/v1/completions", dict(base, max_tokens="4"), 400, ["'max_tokens' is an integer"], "max_tokens"),
        ("/v1/completions", dict(base, max_tokens=0), 400, ["'max_tokens' must be at least 1"], "max_tokens"),
        ("/v1/completions", dict(base, temperature=3), 400, ["'temperature' must be between 0 and 2"], "temperature"),
        ("/v1/completions", dict(base, top_p=0), 400, ["'top_p'"], "top_p"),
        ("/v1/completions", dict(base, stream="yes"), 400, ["'stream' is a boolean"], "stream"),
        ("/v1/completions", dict(base, stop=[1]), 400, ["'stop' is a string"], "stop"),
        ("/v1/completions", dict(base, prompt=["a", "b"]), 400, ["one prompt per request"], "prompt"),
        ("/v1/completions", dict(base, prompt=""), 400, ["the prompt is empty"], None),
        ("/v1/completions", dict(base, stream_options={"include_usage": True}), 400,
         ["only allowed when 'stream' is true"], "stream_options"),
        ("/v1/completions", {"prompt": "hi"}, 400, ["you must provide a model parameter"], "model"),
        ("/v1/completions", {"model": "tiny"}, 400, ["'prompt' is required"], "prompt"),
        ("/v1/chat/completions", dict(chat, messages=[]), 400, ["'messages' is empty"], "messages"),
        ("/v1/chat/completions", dict(chat, messages="hi"), 400, ["'messages' is a list"], "messages"),
        ("/v1/chat/completions", dict(chat, messages=[{"role": "wizard", "content": "x"}]), 400,
         ["role 'wizard' is not supported"], "messages[0].role"),
        ("/v1/chat/completions", dict(chat, messages=[{"role": "user"}]), 400, ["messages[0].content is missing"],
         "messages[0].content"),
        ("/v1/chat/completions", dict(chat, messages=[{"role": "user", "content": 7}]), 400,
         ["messages[0].content is a string"], "messages[0].content"),
        ("/v1/chat/completions", dict(chat, messages=[{"role": "user", "content": [{"type": "image_url"}]}]), 400,
         ["only text parts"], None),
        ("/v1/chat/completions", dict(chat, tools=[{"type": "function"}]), 400, ["'tools' is not supported"],
         "tools"),
        ("/v1/chat/completions", dict(chat, prompt="x"), 400, ["Unrecognized request argument supplied: prompt"],
         "prompt"),
        ("/v1/completions", dict(base, model="nope"), 404, ["The model 'nope' does not exist"], "model"),
        ("/v1/completions", dict(base, model="no_tok"), 400, ["model 'no_tok' has no tokenizer"], None),
        ("/v1/chat/completions", dict(chat, model="no_tok"), 400, ["model 'no_tok' has no tokenizer"], None),
        ("/v1/chat/completions", dict(chat, model="no_template"), 400,
         ["model 'no_template' has no chat template", "/v1/completions"], None),
        # the context: 128 tokens
        ("/v1/completions", dict(base, prompt="hello " * 200), 400,
         ["maximum context length is %d tokens" % MAX_CTX, "your prompt is"], "prompt"),
        ("/v1/completions", dict(base, max_tokens=500), 400,
         ["'max_tokens' is too large: 500", "maximum context length is %d" % MAX_CTX, "500 > %d - " % MAX_CTX],
         "max_tokens"),
        ("/v1/chat/completions", dict(chat, max_tokens=10 ** 6), 400, ["'max_tokens' is too large"], "max_tokens"),
    ]
    for path, body, status, parts, param in cases:
        st, _, data = post(srv, path, body)
        openai_error(st, data, status, *parts, param=param)
    err = openai_error(*post(srv, "/v1/completions", dict(base, model="nope"))[::2], 404)
    assert err["code"] == "model_not_found"
    # bytes that are not JSON, or not UTF-8, or not an object
    openai_error(*post(srv, "/v1/completions", None, raw=b'{"model": "tiny", "prompt": "\xff\xfe"}')[::2], 400,
                 "not valid JSON")
    openai_error(*post(srv, "/v1/completions", None, raw=b"{not json")[::2], 400, "not valid JSON")
    openai_error(*post(srv, "/v1/completions", None, raw=b"[1]")[::2], 400, "not a JSON object")
    st, _, data = lib.http_call(srv, "GET", "/v1/completions")
    openai_error(st, data, 405, "POST")
    st, _, data = lib.http_call(srv, "GET", "/v1/embeddings")
    openai_error(st, data, 404, "not found")
    # the server still answers; a model without a chat template still completes
    st, _, data = post(srv, "/v1/completions", dict(base, temperature=0))
    assert st == 200 and json.loads(data)["usage"]["completion_tokens"] == 4
    c = FX["completions"][0]
    st, _, data = post(srv, "/v1/completions", {"model": "no_template", "prompt": c["prompt"], "max_tokens": MAX_NEW,
                                                "temperature": 0})
    assert st == 200 and json.loads(data)["choices"][0]["text"] == c["text"]


def test_openai_client_errors(oc):
    with pytest.raises(openai.NotFoundError) as ei:
        oc.completions.create(model="nope", prompt="x")
    assert ei.value.status_code == 404 and "does not exist" in ei.value.message
    with pytest.raises(openai.BadRequestError) as ei:
        oc.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}], n=3)
    assert "'n' must be 1" in ei.value.message and ei.value.param == "n"


def test_broken_tokenizer_fails_the_load(srv):
    st, _, data = post(srv, "/v2/repository/index", {})
    idx = {m["name"]: m for m in json.loads(data)}
    assert idx["tiny"]["state"] == "READY"
    assert idx["bad_tok"]["state"] != "READY"
    assert "tokenizer" in idx["bad_tok"]["reason"] and "Unigram" in idx["bad_tok"]["reason"], idx["bad_tok"]
    assert "chat template" in idx["bad_template"]["reason"], idx["bad_template"]
    why = idx["both_bad"]["reason"]
    assert "tokenizer: " in why and "chat template: " in why, why
    why = idx["wrong_vocab"]["reason"]
    assert "its 2505 ids go past the model's vocabulary of 256" in why, why


# --- a client that leaves


def test_client_gone_mid_stream_frees_blocks_others_go_on(srv, oc):
    u = urllib.parse.urlparse(srv.http_url)
    body = json.dumps({"model": "slow_text", "messages": [{"role": "user", "content": "go on"}],
                       "max_tokens": 3000, "temperature": 0, "stream": True}).encode()
    g0 = metric(srv, "inferd_llm_generated_tokens_total", "slow_text")
    sock = socket.create_connection((u.hostname, u.port), timeout=WAIT_S)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while got.count(b"data: ") < 3:
        chunk = sock.recv(65536)
        assert chunk, got
        got += chunk
    assert b"text/event-stream" in got
    assert metric(srv, "inferd_llm_kv_blocks_used", "slow_text") > 0
    # another stream on the same model goes on while the first one's client leaves
    other = oc.chat.completions.create(model="slow_text", messages=[{"role": "user", "content": "hi"}],
                                       max_tokens=40, temperature=0, stream=True)
    first = next(other)
    sock.close()
    rest = list(other)
    assert first.choices[0].delta.role == "assistant"
    assert rest[-1].choices[0].finish_reason in ("length", "stop")
    await_metric(srv, "inferd_llm_running_sequences", "slow_text", lambda v: v == 0)
    await_metric(srv, "inferd_llm_kv_blocks_used", "slow_text", lambda v: v == 0)
    assert metric(srv, "inferd_llm_generated_tokens_total", "slow_text") - g0 < 2900


# --- ModelStreamInfer with Triton's vLLM backend's tensors


def vllm_inputs(prompt, params, stream=None, exclude=None):
    import tritonclient.grpc as grpcclient
    ins = []

    def add(name, arr, dt):
        t = grpcclient.InferInput(name, list(arr.shape), dt)
        t.set_data_from_numpy(arr)
        ins.append(t)

    add("text_input", np.array([prompt.encode()], dtype=np.object_), "BYTES")
    if params is not None:
        add("sampling_parameters", np.array([json.dumps(params).encode()], dtype=np.object_), "BYTES")
    if stream is not None:
        add("stream", np.array([stream]), "BOOL")
    if exclude is not None:
        add("exclude_input_in_output", np.array([exclude]), "BOOL")
    return ins


def vllm_stream(srv, requests):
    """Sends each (id, inputs) on one gRPC stream; returns {id: ([text_output of each response], final seen,
    error)} once every request has its final response or an error."""
    import tritonclient.grpc as grpcclient
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    q = queue.Queue()
    c.start_stream(callback=lambda result, error: q.put((result, error)))
    res = {rid: ([], False, None) for rid, _ in requests}
    try:
        for rid, ins in requests:
            outs = [grpcclient.InferRequestedOutput("text_output")]
            c.async_stream_infer("tiny", ins, request_id=rid, outputs=outs)
        t_end = time.monotonic() + WAIT_S
        while not all(r[1] or r[2] for r in res.values()):
            result, error = q.get(timeout=max(0.01, t_end - time.monotonic()))
            if error is not None:
                pending = [k for k, r in res.items() if not (r[1] or r[2])]
                res[pending[0]] = (res[pending[0]][0], False, str(error))
                continue
            resp = result.get_response()
            texts, _, _ = res[resp.id]
            t = result.as_numpy("text_output")
            if t is not None:
                assert t.shape == (1,), t.shape
                texts.append(t[0].decode())
            res[resp.id] = (texts, resp.parameters["triton_final_response"].bool_param, None)
    finally:
        c.stop_stream()
        c.close()
    return res


def test_grpc_vllm_tensors(srv):
    p = {"max_tokens": MAX_NEW, "temperature": 0}
    c0, c1 = FX["completions"][0], FX["completions"][1]
    cs, stop, want = stop_case()
    res = vllm_stream(srv, [
        ("streamed", vllm_inputs(c0["prompt"], p, stream=True)),
        ("whole", vllm_inputs(c1["prompt"], p, stream=False)),
        ("whole_excl", vllm_inputs(c1["prompt"], {"max_tokens": str(MAX_NEW), "temperature": "0"}, exclude=True)),
        ("stopped", vllm_inputs(cs["prompt"], dict(p, stop=stop), stream=True)),
    ])
    texts, final, err = res["streamed"]
    assert err is None and final
    assert "".join(texts) == c0["text"] and len(texts) >= 3  # one response per delta, the final flagged
    texts, final, err = res["whole"]
    assert err is None and final and texts == [c1["prompt"] + c1["text"]]
    assert res["whole_excl"][0] == [c1["text"]]
    assert "".join(res["stopped"][0]) == want


def test_grpc_vllm_errors(srv):
    res = vllm_stream(srv, [("a", vllm_inputs("hi", {"warp": 1}))])
    assert "unknown sampling parameter 'warp'" in res["a"][2]
    res = vllm_stream(srv, [("a", vllm_inputs("hi", None, stream=True, exclude=False))])
    assert "exclude_input_in_output = false is not allowed" in res["a"][2]
    res = vllm_stream(srv, [("a", vllm_inputs("hello " * 200, None))])
    assert "maximum context length is %d" % MAX_CTX in res["a"][2]
    import tritonclient.grpc as grpcclient
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    q = queue.Queue()
    c.start_stream(callback=lambda result, error: q.put((result, error)))
    try:
        c.async_stream_infer("no_tok", vllm_inputs("hi", None), request_id="x")
        _, error = q.get(timeout=WAIT_S)
        assert error is not None and "has no tokenizer" in str(error)
        bad = vllm_inputs("hi", None)
        bad[0] = grpcclient.InferInput("sampling_parameters", [1], "BYTES")
        bad[0].set_data_from_numpy(np.array([b"{not json"], dtype=np.object_))
        c.async_stream_infer("tiny", vllm_inputs("hi", None) + bad, request_id="y")
        _, error = q.get(timeout=WAIT_S)
        assert error is not None and "not a JSON object" in str(error)
    finally:
        c.stop_stream()
        c.close()


def test_stop_strings_at_many_places(oc):
    """Stop strings of 1 to 4 characters taken from every answer at several places (multi-byte characters
    and token boundaries among them): streamed and not, the text is the reference up to the first
    occurrence, and a streamed delta never showed a stop string's start that later completed."""
    tried = 0
    for c in FX["completions"]:
        text = c["text"]
        for n in (1, 2, 4):
            for frac in (0.25, 0.5, 0.8):
                i = int(len(text) * frac)
                s = text[i:i + n]
                if len(s) < n or "\ufffd" in s:
                    continue
                want = text[:text.find(s)]
                r = oc.completions.create(model="tiny", prompt=c["prompt"], max_tokens=MAX_NEW, temperature=0,
                                          stop=s)
                assert r.choices[0].text == want, (s, r.choices[0].text, want)
                assert r.choices[0].finish_reason == "stop"
                chunks = list(oc.completions.create(model="tiny", prompt=c["prompt"], max_tokens=MAX_NEW,
                                                    temperature=0, stop=s, stream=True))
                assert "".join(ch.choices[0].text for ch in chunks) == want, s
                tried += 1
    assert tried >= 10


# --- log probabilities


def test_logprobs_equal_transformers(oc):
    """Each greedy token's log probability (log-softmax of the raw logits) and the most likely alternatives
    equal transformers', in both of OpenAI's shapes, streamed and not."""
    c = FX["completions"][0]
    r = oc.completions.create(model="tiny", prompt=c["prompt"], max_tokens=MAX_NEW, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert r.choices[0].text == c["text"]
    assert len(lp.token_logprobs) == c["completion_tokens"]
    np.testing.assert_allclose(lp.token_logprobs, c["logprobs"], atol=2e-4)
    for got, want in zip(lp.top_logprobs, c["top3"]):
        assert len(got) <= 3
        np.testing.assert_allclose(sorted(got.values(), reverse=True)[:1], [want[0][1]], atol=2e-4)
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    chunks = list(oc.completions.create(model="tiny", prompt=c["prompt"], max_tokens=MAX_NEW, temperature=0,
                                        logprobs=0, stream=True))
    streamed = [x for ch in chunks if ch.choices[0].logprobs for x in ch.choices[0].logprobs.token_logprobs]
    np.testing.assert_allclose(streamed, c["logprobs"], atol=2e-4)
    h = FX["chats"][1]
    r = oc.chat.completions.create(model="tiny", messages=h["messages"], max_tokens=MAX_NEW, temperature=0,
                                   logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    np.testing.assert_allclose([x.logprob for x in content], h["logprobs"], atol=2e-4)
    for x, want in zip(content, h["top3"]):
        np.testing.assert_allclose([t.logprob for t in x.top_logprobs], [w[1] for w in want], atol=2e-4)
        assert x.top_logprobs[0].logprob == pytest.approx(x.logprob, abs=1e-6)  # greedy: the top one
        assert bytes(x.bytes).decode("utf-8", "replace") == x.token
    r = oc.chat.completions.create(model="tiny", messages=h["messages"], max_tokens=MAX_NEW, temperature=0,
                                   logprobs=False)
    assert r.choices[0].logprobs is None
