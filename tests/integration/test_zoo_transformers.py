"""Transformer models as torch's own exporters wrote them (tests/models/zoo/graphs: BERT and
DistilBERT encoders, ViT, a GPT-2-shaped causal decoder without KV cache; TorchScript-based at
opset 17 and dynamo at 18; weights filled by fill.py), plus two made here with the onnx package: a
sentence-embedding model (DistilBERT with the mean pooling sentence-transformers exports) and a
token model whose inputs and outputs are INT64, INT32 and BOOL. All are served WITHOUT a
config.pbtxt (auto-complete) by the real server and checked against onnxruntime on the CPU:

- one request alone (batch 1);
- several requests of the same sequence length in flight at once (for models with a dynamic batch
  dimension the dynamic batcher may put them in one batch; the dynamo graphs of BERT, DistilBERT and
  ViT were exported with batch 1 fixed, so auto-complete gives them max_batch_size 0 and each
  request runs alone);
- requests of DIFFERENT sequence lengths in flight at once: each must get its own answer (they may
  not share a batch; requests whose non-batch dims differ never do today).

Feeds are what such models get: token ids in [0, vocab) (vocab read from the embedding the ids
index), attention masks of 1s with trailing 0s of padding (each row its own length), pixel values
for ViT.

Every exported transformer graph is served by default (small: the whole file runs in a few seconds
on 2 cores); INFERD_ZOO=name[,name] picks some (names of vision graphs are left to test_zoo.py).
"""

import concurrent.futures as cf
import os
import sys

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper, numpy_helper
from tritonclient.utils import np_to_triton_dtype

import inferd_testlib as lib

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "models", "zoo"))
import fill  # noqa: E402

TRANSFORMERS = ["bert", "distilbert", "vit", "gpt"]
MEANPOOL = "distilbert_meanpool"  # made here from distilbert.ts17
TOKENS = "tokens"  # made here: INT64/INT32/BOOL in and out
RTOL = 1e-4  # normwise (lib.assert_close): matrix products sum in other orders than MLAS
AUTO_MAX_BATCH = 4  # inferd's --default-max-batch-size default, as Triton's
TRITON_TYPE = {1: "TYPE_FP32", 6: "TYPE_INT32", 7: "TYPE_INT64", 9: "TYPE_BOOL"}
WIRE = {1: "FP32", 6: "INT32", 7: "INT64", 9: "BOOL"}
SEQ = 8  # sequence length of the batch-1 and same-length requests
SEQS = (5, 9, 12, 16)  # the different lengths sent at once


def _wanted():
    env = os.environ.get("INFERD_ZOO", "")
    if env == "all":
        return fill.select(TRANSFORMERS)
    if not env:  # every graph: they are small (2-3 MB filled), the whole file runs in seconds
        return fill.select(TRANSFORMERS)
    return fill.select([n for n in env.split(",") if n.split(".")[0] in TRANSFORMERS])


# --- models made with the onnx package

def _write_meanpool(d):
    """distilbert.ts17 (filled) + mean pooling over the unpadded tokens, as sentence-transformers
    exports it: sum(h * mask) / max(sum(mask), 1e-9)."""
    m = fill.fill_model(fill.available()["distilbert.ts17"], 7)
    g = m.graph
    h = g.output[0].name
    g.node.extend([
        helper.make_node("Cast", ["attention_mask"], ["mp_maskf"], name="mp_cast", to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mp_maskf", "mp_axis_m1"], ["mp_mask3"], name="mp_unsq"),
        helper.make_node("Mul", [h, "mp_mask3"], ["mp_masked"], name="mp_mul"),
        helper.make_node("ReduceSum", ["mp_masked", "mp_axis_1"], ["mp_sum"], name="mp_sum", keepdims=0),
        helper.make_node("ReduceSum", ["mp_mask3", "mp_axis_1"], ["mp_count"], name="mp_count", keepdims=0),
        helper.make_node("Max", ["mp_count", "mp_eps"], ["mp_countc"], name="mp_clamp"),
        helper.make_node("Div", ["mp_sum", "mp_countc"], ["sentence_embedding"], name="mp_div")])
    g.initializer.extend([numpy_helper.from_array(np.array([-1], np.int64), "mp_axis_m1"),
                          numpy_helper.from_array(np.array([1], np.int64), "mp_axis_1"),
                          numpy_helper.from_array(np.array(1e-9, np.float32), "mp_eps")])
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", 128]))
    _save(d, MEANPOOL, m)


def _write_tokens(d):
    """Integer and bool tensors through the graph and over the wire, the way tokenizer-side
    pre/post-processing uses them: masked ids, positions from a running sum of the mask, a pad
    mask, and a type-id test."""
    nodes = [
        helper.make_node("Where", ["attention_mask", "input_ids", "minus1"], ["masked_ids"], name="mask_ids"),
        helper.make_node("Cast", ["attention_mask"], ["mask32"], name="cast", to=TensorProto.INT32),
        helper.make_node("CumSum", ["mask32", "axis1"], ["token_count"], name="cumsum"),
        helper.make_node("Cast", ["token_count"], ["count64"], name="cast64", to=TensorProto.INT64),
        helper.make_node("Sub", ["count64", "one64"], ["positions"], name="pos"),
        helper.make_node("Not", ["attention_mask"], ["pad"], name="not"),
        helper.make_node("Equal", ["token_type_ids", "one32"], ["second_segment"], name="eq"),
    ]
    inits = [numpy_helper.from_array(np.array(-1, np.int64), "minus1"),
             numpy_helper.from_array(np.array(1, np.int32), "axis1"),
             numpy_helper.from_array(np.array(1, np.int32), "one32"),
             numpy_helper.from_array(np.array(1, np.int64), "one64")]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        nodes, "tokens",
        [vi("input_ids", TensorProto.INT64, ["batch", "seq"]), vi("attention_mask", TensorProto.BOOL, ["batch", "seq"]),
         vi("token_type_ids", TensorProto.INT32, ["batch", "seq"])],
        [vi("masked_ids", TensorProto.INT64, ["batch", "seq"]), vi("positions", TensorProto.INT64, ["batch", "seq"]),
         vi("token_count", TensorProto.INT32, ["batch", "seq"]), vi("pad", TensorProto.BOOL, ["batch", "seq"]), vi("second_segment", TensorProto.BOOL, ["batch", "seq"])],
        initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="inferd-test")
    m.ir_version = 8
    onnx.checker.check_model(m)
    _save(d, TOKENS, m)


def _save(d, name, m):
    os.makedirs(os.path.join(d, name, "1"), exist_ok=True)
    onnx.save(m, os.path.join(d, name, "1", "model.onnx"))


def _spec_of(path):
    m = onnx.load(path)
    inits = {t.name for t in m.graph.initializer}

    def io(v):
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim]
        return {"name": v.name, "elem": v.type.tensor_type.elem_type, "dims": dims}
    vocab = None
    for n in m.graph.node:  # the embedding the token ids index: its first dim is the vocabulary
        if n.op_type == "Gather" and len(n.input) > 1 and n.input[1] == "input_ids":
            vocab = next((t.dims[0] for t in m.graph.initializer if t.name == n.input[0]), None)
    return {"inputs": [io(v) for v in m.graph.input if v.name not in inits],
            "outputs": [io(v) for v in m.graph.output], "vocab": vocab}


# --- fixture

@pytest.fixture(scope="module")
def xf(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("zoo_xf_repo"))
    fill.write_repo(d, _wanted(), configs=set())
    _write_meanpool(d)
    _write_tokens(d)
    names = sorted(os.listdir(d))
    for name in names:
        assert not os.path.exists(os.path.join(d, name, "config.pbtxt")), name
    spec = {n: _spec_of(os.path.join(d, n, "1", "model.onnx")) for n in names}
    srv_gen = lib.served(d, ["--strict-readiness", "false"])
    srv = next(srv_gen)
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    yield d, spec, srv, c, {}
    c.close()
    next(srv_gen, None)


def _ready(xf, name):
    _, _, srv, c, _ = xf
    lib.require_ready(srv, c, name)


def _session(xf, name):
    d, _, _, _, sessions = xf
    return lib.ort_session(sessions, os.path.join(d, name, "1", "model.onnx"))


def _batching(s):
    return all(t["dims"][0] == -1 for t in s["inputs"] + s["outputs"])


def _feeds(s, rng, rows, seq):
    """rows: the batch (1 for a graph with batch 1 fixed). Every row gets its own length, always
    padded (so a lone request of a batch-1 graph is masked too), except the first of several rows,
    which keeps the full length."""
    lengths = rng.integers(max(1, seq // 2), seq, rows)
    if rows > 1:
        lengths[0] = seq
    feeds = {}
    for t in s["inputs"]:
        dims = [rows] + [seq if d == -1 else d for d in t["dims"][1:]]
        name = t["name"]
        if name == "input_ids":
            hi = s["vocab"] or 1000
            a = rng.integers(0, hi, dims).astype(np.int64)
        elif name == "attention_mask":
            a = np.arange(seq)[None, :] < lengths[:, None]
            a = a if t["elem"] == TensorProto.BOOL else a.astype(np.int64)
        elif name == "token_type_ids":
            a = rng.integers(0, 2, dims).astype(np.int32)
        else:
            a = rng.standard_normal(dims).astype(np.float32)
        feeds[name] = a
    return feeds


def _inputs(feeds):
    out = []
    for k, v in feeds.items():
        x = grpcclient.InferInput(k, list(v.shape), np_to_triton_dtype(v.dtype))
        x.set_data_from_numpy(v)
        out.append(x)
    return out


def _infer(url, name, feeds):
    res = grpcclient.InferenceServerClient(url=url).infer(name, _inputs(feeds))
    return {o.name: res.as_numpy(o.name) for o in res.get_response().outputs}


def _check(xf, name, feeds, got, what):
    sess = _session(xf, name)
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    assert sorted(got) == sorted(want), (what, sorted(got), sorted(want))
    for k in want:
        assert got[k].dtype == want[k].dtype, (name, what, k, got[k].dtype, want[k].dtype)
        lib.assert_close(got[k], want[k], RTOL, what="%s %s %s" % (name, what, k))
        if want[k].dtype == np.float32:
            assert np.std(want[k]) > 0, "%s: the oracle's %s is constant, the comparison proves nothing" % (name, k)


def _rows_for(s, r):
    return r if _batching(s) else 1


def _has_seq(s):
    return any(-1 in t["dims"][1:] for t in s["inputs"])


def _all_models():
    return [g.replace(".", "_") for g in _wanted()] + [MEANPOOL, TOKENS]


@pytest.mark.parametrize("name", _all_models())
def test_transformer_serves_like_onnxruntime(xf, rng, name):
    _, spec, srv, c, _ = xf
    _ready(xf, name)
    s = spec[name]
    # one request alone
    f = _feeds(s, rng, 1, SEQ)
    _check(xf, name, f, _infer(srv.grpc_url, name, f), "batch 1")
    # three requests of one length at once (1, 2 and 1 rows where the model batches)
    reqs = [_feeds(s, rng, _rows_for(s, r), SEQ) for r in (1, 2, 1)]
    with cf.ThreadPoolExecutor(len(reqs)) as ex:
        answers = list(ex.map(lambda f: _infer(srv.grpc_url, name, f), reqs))
    for i, (f, got) in enumerate(zip(reqs, answers)):
        _check(xf, name, f, got, "request %d of 3 in flight" % i)


@pytest.mark.parametrize("name", [n for n in _all_models() if not n.startswith("vit")])
def test_transformer_sequence_lengths_in_flight(xf, rng, name):
    """Requests of different sequence lengths at once, twice over (each length's plan signature is
    met again after the others): each gets the answer for its own length."""
    _, spec, srv, c, _ = xf
    _ready(xf, name)
    s = spec[name]
    assert _has_seq(s), s
    reqs = [_feeds(s, rng, _rows_for(s, 1 + i % 2), t) for i, t in enumerate(SEQS * 2)]
    with cf.ThreadPoolExecutor(len(reqs)) as ex:
        answers = list(ex.map(lambda f: _infer(srv.grpc_url, name, f), reqs))
    for f, got in zip(reqs, answers):
        t = next(iter(f.values())).shape[1]
        _check(xf, name, f, got, "length %d among %s in flight" % (t, list(SEQS)))


@pytest.mark.parametrize("name", _all_models())
def test_transformer_config_autocompleted(xf, name):
    """Triton's auto-complete from the graph: types (INT64/INT32/BOOL included), dims with the batch
    dimension stripped when every input and output has a dynamic first one (max_batch_size 4),
    else max_batch_size 0 and the full dims."""
    _, spec, _, c, _ = xf
    _ready(xf, name)
    s = spec[name]
    batching = _batching(s)
    cfg = c.get_model_config(name, as_json=True)["config"]
    assert int(cfg.get("max_batch_size", 0)) == (AUTO_MAX_BATCH if batching else 0), (name, cfg)
    assert cfg.get("platform") == "onnxruntime_onnx", cfg
    cut = 1 if batching else 0
    for key, ts in (("input", s["inputs"]), ("output", s["outputs"])):
        got = [(t["name"], t["data_type"], [int(x) for x in t.get("dims", [])]) for t in cfg[key]]
        assert got == [(t["name"], TRITON_TYPE[t["elem"]], t["dims"][cut:]) for t in ts], (name, key, cfg[key])
    meta = c.get_model_metadata(name, as_json=True)
    for key, ts in (("inputs", s["inputs"]), ("outputs", s["outputs"])):
        got = [(t["name"], t["datatype"], [int(x) for x in t["shape"]]) for t in meta[key]]
        assert got == [(t["name"], WIRE[t["elem"]], ([-1] if batching else []) + t["dims"][cut:]) for t in ts], meta


def test_tokens_values(xf, rng):
    """The INT64/INT32/BOOL model's outputs, computed here as well as by onnxruntime: what the
    wire carries back is the values, not only matching types."""
    _, spec, srv, _, _ = xf
    _ready(xf, TOKENS)
    f = _feeds(spec[TOKENS], rng, 3, 6)
    f["attention_mask"][1, 4:] = False
    got = _infer(srv.grpc_url, TOKENS, f)
    m = f["attention_mask"]
    np.testing.assert_array_equal(got["masked_ids"], np.where(m, f["input_ids"], -1))
    np.testing.assert_array_equal(got["token_count"], np.cumsum(m, axis=1).astype(np.int32))
    np.testing.assert_array_equal(got["positions"], np.cumsum(m, axis=1) - 1)
    np.testing.assert_array_equal(got["pad"], ~m)
    np.testing.assert_array_equal(got["second_segment"], f["token_type_ids"] == 1)
    assert got["pad"].dtype == np.bool_ and got["positions"].dtype == np.int64
    assert got["token_count"].dtype == np.int32


def test_padding_is_masked(xf, rng):
    """What the attention mask is for: changing the ids under the padding leaves the sentence
    embedding alone, while changing an unpadded id moves it."""
    _, spec, srv, _, _ = xf
    _ready(xf, MEANPOOL)
    f = _feeds(spec[MEANPOOL], rng, 1, 10)
    f["attention_mask"][0, 6:] = 0
    base = _infer(srv.grpc_url, MEANPOOL, f)["sentence_embedding"]
    g = {k: v.copy() for k, v in f.items()}
    g["input_ids"][0, 6:] = (g["input_ids"][0, 6:] + 1) % spec[MEANPOOL]["vocab"]
    same = _infer(srv.grpc_url, MEANPOOL, g)["sentence_embedding"]
    lib.assert_close(same, base, RTOL, what="padded ids changed")
    g["input_ids"][0, 2] = (g["input_ids"][0, 2] + 1) % spec[MEANPOOL]["vocab"]
    moved = _infer(srv.grpc_url, MEANPOOL, g)["sentence_embedding"]
    assert np.max(np.abs(moved - base)) > 1e-3, "an unpadded id changed and the embedding did not"
