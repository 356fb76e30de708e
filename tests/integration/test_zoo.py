"""The models users bring, as torch's own exporters wrote them: torchvision classifiers and the
seeds' CNN (tests/models/zoo/graphs, exported by export_zoo.py with the TorchScript-based exporter
at opsets 13 and 17 and the dynamo exporter at opset 18; weights filled here by fill.py), served by
the real server and checked against onnxruntime, one request alone and several batched together.

Every model but two is served WITHOUT a config.pbtxt (the issue's "done when": each family loads
by auto-complete): the tests read back through the client what the server filled in from the graph,
Triton's way (inputs/outputs with the batch dimension stripped, max_batch_size = the default 4 when
every input and output has a dynamic first dimension, dynamic_batching when max_batch_size > 1 and
no scheduler is set, its preferred size max_batch_size). WITH_CONFIG keeps a written config.pbtxt
whose max_batch_size differs; GROUP_ONLY one that says only instance_group, which Triton's
onnxruntime backend completes like a missing one (it lists no inputs/outputs).

The camera models (camera.py: UINT8 NHWC frames and FP16 planes, normalised by the model's own
Transpose/Cast/Div/Sub front) are served by the same server, also auto-completed.

INFERD_ZOO=all serves every exported vision graph (vgg11's three are 0.5 GB each, left out by
default to keep CI's disk and time small); INFERD_ZOO=name[,name] picks some. The transformer graphs
of the zoo are test_zoo_transformers.py's.
"""

import concurrent.futures as cf
import os
import sys

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

import inferd_testlib as lib

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "models", "zoo"))
import camera  # noqa: E402
import fill  # noqa: E402

DEFAULT = ["seedcnn.ts17", "seedcnn.dynamo18", "resnet18", "resnet50.dynamo18", "mobilenet_v3_small",
           "mobilenet_v3_large.ts17", "efficientnet_b0.ts13", "efficientnet_b0.dynamo18"]
VISION = ["seedcnn", "resnet18", "resnet50", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "vgg11"]
RTOL = 1e-4  # normwise (see lib.assert_close); convolution sums in other orders than onnxruntime's MLAS
WITH_CONFIG = "resnet18.ts13"  # a zoo model with fill's config.pbtxt (max_batch_size 8, dynamic_batching {})
GROUP_ONLY = "mobilenet_v3_small.ts17"  # one whose config.pbtxt holds only `instance_group [{ count: 2 }]`
CONFIG_MAX_BATCH = 8  # what that file says; auto-complete would have given 4
AUTO_MAX_BATCH = 4  # Triton's default-max-batch-size, inferd's --default-max-batch-size default
TRITON_TYPE = {1: "TYPE_FP32", 2: "TYPE_UINT8", 10: "TYPE_FP16"}  # ONNX elem type -> config data_type
WIRE = {1: "FP32", 2: "UINT8", 10: "FP16"}


def _wanted():
    env = os.environ.get("INFERD_ZOO", "")
    if env == "all":
        return fill.select(VISION)
    if not env:
        return fill.select(DEFAULT)
    # transformer graphs need token ids and masks: test_zoo_transformers.py serves those
    return fill.select([n for n in env.split(",") if n.split(".")[0] in VISION])


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("zoo_repo"))
    wanted = _wanted()
    spec = fill.write_repo(d, wanted, max_batch=CONFIG_MAX_BATCH, configs={WITH_CONFIG} & set(wanted))
    if GROUP_ONLY in wanted:
        name = GROUP_ONLY.replace(".", "_")
        with open(os.path.join(d, name, "config.pbtxt"), "w") as f:
            f.write("instance_group [{ count: 2 }]\n")
        spec[name]["config"] = "group"
    camera.write_repo(d)
    for name in os.listdir(d):
        assert os.path.exists(os.path.join(d, name, "config.pbtxt")) == bool(spec.get(name, {}).get("config")), name
    srv_gen = lib.served(d, ["--strict-readiness", "false"])
    srv = next(srv_gen)
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    sessions = {}
    yield d, spec, srv, c, sessions
    c.close()
    next(srv_gen, None)


def _ready(zoo, name):
    _, _, srv, c, _ = zoo
    lib.require_ready(srv, c, name)


def _session(zoo, name):
    d, _, _, _, sessions = zoo
    return lib.ort_session(sessions, os.path.join(d, name, "1", "model.onnx"))


def _feeds(spec, rng, rows):
    return {i["name"]: rng.standard_normal([rows] + i["dims"][1:]).astype(np.float32) for i in spec["inputs"]}


def _check(zoo, name, feeds, got, what):
    want = dict(zip([o.name for o in _session(zoo, name).get_outputs()], _session(zoo, name).run(None, feeds)))
    assert sorted(got) == sorted(want), (what, sorted(got), sorted(want))
    for k in want:
        lib.assert_close(got[k], want[k], RTOL, what="%s %s %s" % (name, what, k))
        assert np.std(want[k]) > 0, "%s: the oracle's output is constant, the comparison proves nothing" % name


def _infer_threads(srv, name, reqs):
    """Sends the requests at once, one client each, so the dynamic batcher can put them together."""
    with cf.ThreadPoolExecutor(len(reqs)) as ex:
        return list(ex.map(lambda f: lib.infer(grpcclient.InferenceServerClient(url=srv.grpc_url), name, f)[1], reqs))


@pytest.mark.parametrize("graph", _wanted())
def test_zoo_model_serves_like_onnxruntime(zoo, rng, graph):
    d, spec, srv, c, _ = zoo
    name = graph.replace(".", "_")
    _ready(zoo, name)
    s = spec[name]
    # one request alone
    feeds = _feeds(s, rng, 1)
    _, got = lib.infer(c, name, feeds)
    _check(zoo, name, feeds, got, "batch 1")
    # three requests at once (1, 2 and 1 rows): batched by the dynamic batcher, each answered with its rows
    reqs = [_feeds(s, rng, r) for r in (1, 2, 1)]
    for i, (f, got) in enumerate(zip(reqs, _infer_threads(srv, name, reqs))):
        _check(zoo, name, f, got, "request %d of 3 in flight" % i)


def _tensors(entries):
    return [(t["name"], t["data_type"], [int(x) for x in t.get("dims", [])]) for t in entries]


def _assert_autocompleted(c, name, inputs, outputs, max_batch):
    """inputs/outputs: [(name, ONNX elem type, graph dims with the batch dimension first)]."""
    for _, _, dims in inputs + outputs:
        assert dims[0] == -1, "%s: the graph's first dimension %s is not dynamic; the test assumes it" % (name, dims)
    cfg = c.get_model_config(name, as_json=True)["config"]
    assert int(cfg.get("max_batch_size", 0)) == max_batch, (name, cfg)
    assert "dynamic_batching" in cfg, "%s: no dynamic_batching in %s" % (name, cfg)
    # Triton's normalisation: no preferred sizes given means max_batch_size is the preferred one
    assert [int(x) for x in cfg["dynamic_batching"].get("preferred_batch_size", [])] == [max_batch], cfg
    assert "sequence_batching" not in cfg and "ensemble_scheduling" not in cfg, cfg
    want_in = [(n, TRITON_TYPE[t], dims[1:]) for n, t, dims in inputs]
    want_out = [(n, TRITON_TYPE[t], dims[1:]) for n, t, dims in outputs]
    assert _tensors(cfg["input"]) == want_in, (name, cfg["input"])
    assert _tensors(cfg["output"]) == want_out, (name, cfg["output"])
    meta = c.get_model_metadata(name, as_json=True)
    assert [(t["name"], t["datatype"], [int(x) for x in t["shape"]]) for t in meta["inputs"]] == \
        [(n, WIRE[t], [-1] + dims[1:]) for n, t, dims in inputs], meta
    assert [(t["name"], t["datatype"], [int(x) for x in t["shape"]]) for t in meta["outputs"]] == \
        [(n, WIRE[t], [-1] + dims[1:]) for n, t, dims in outputs], meta
    return cfg


def _too_many_rows(c, name, feeds):
    """A request of max_batch_size + 1 rows: refused, naming the limit auto-complete set."""
    with pytest.raises(Exception) as ei:
        c.infer(name, _inputs(feeds))
    assert lib.status_name(ei.value) == "INVALID_ARGUMENT", ei.value
    assert "exceeds max_batch_size" in lib.error_message(ei.value), lib.error_message(ei.value)


def _inputs(feeds):
    from tritonclient.utils import np_to_triton_dtype
    out = []
    for k, v in feeds.items():
        x = grpcclient.InferInput(k, list(v.shape), np_to_triton_dtype(v.dtype))
        x.set_data_from_numpy(v)
        out.append(x)
    return out


@pytest.mark.parametrize("graph", _wanted())
def test_zoo_config_autocompleted_from_graph(zoo, rng, graph):
    d, spec, srv, c, _ = zoo
    name = graph.replace(".", "_")
    _ready(zoo, name)
    s = spec[name]
    io = lambda ts: [(t["name"], t["elem"], t["dims"]) for t in ts]  # noqa: E731
    mbs = CONFIG_MAX_BATCH if s["config"] is True else AUTO_MAX_BATCH
    cfg = _assert_autocompleted(c, name, io(s["inputs"]), io(s["outputs"]), mbs)
    if s["config"] is not True:
        assert cfg.get("platform") == "onnxruntime_onnx", cfg  # nothing said: Triton names the ONNX platform
        _too_many_rows(c, name, _feeds(s, rng, AUTO_MAX_BATCH + 1))
    groups = cfg["instance_group"]
    assert [int(g.get("count", 0)) for g in groups] == [2 if s["config"] == "group" else 1], groups


# --- camera-style inputs: UINT8 NHWC frames, FP16 planes

@pytest.mark.parametrize("name", sorted(camera.MODELS))
def test_camera_input_autocompleted(zoo, rng, name):
    _, _, _, c, _ = zoo
    _ready(zoo, name)
    _, inp, dt, shape, odt = camera.MODELS[name]
    elem = {np.uint8: 2, np.float16: 10}[dt]
    _assert_autocompleted(c, name, [(inp, elem, [-1] + shape)],
                          [("logits", {np.float32: 1, np.float16: 10}[odt], [-1, camera.CLASSES])], AUTO_MAX_BATCH)
    _too_many_rows(c, name, {inp: camera.images(name, rng, AUTO_MAX_BATCH + 1)})


@pytest.mark.parametrize("name", sorted(camera.MODELS))
def test_camera_input_serves_like_onnxruntime(zoo, rng, name):
    d, _, srv, c, _ = zoo
    _ready(zoo, name)
    inp, odt = camera.MODELS[name][1], camera.MODELS[name][4]
    rtol = 1e-3 if odt == np.float16 else RTOL  # FP16 logits: one half-precision rounding apart at most

    def check(feeds, got, what):
        want = {o.name: v for o, v in zip(_session(zoo, name).get_outputs(), _session(zoo, name).run(None, feeds))}
        assert sorted(got) == ["logits"], got.keys()
        lib.assert_close(got["logits"], want["logits"], rtol, what="%s %s" % (name, what))
        assert np.std(want["logits"].astype(np.float32)) > 0.1, "%s: the oracle's logits are flat" % name

    x = camera.images(name, rng, 1)
    res = c.infer(name, _inputs({inp: x}))
    check({inp: x}, {"logits": res.as_numpy("logits")}, "batch 1")
    reqs = [{inp: camera.images(name, rng, r)} for r in (1, 2, 1)]
    with cf.ThreadPoolExecutor(len(reqs)) as ex:
        answers = list(ex.map(lambda f: grpcclient.InferenceServerClient(url=srv.grpc_url).infer(
            name, _inputs(f)).as_numpy("logits"), reqs))
    for i, (f, got) in enumerate(zip(reqs, answers)):
        check(f, {"logits": got}, "request %d of 3 in flight" % i)
    # the front really normalises: a black frame and a white one give different logits
    lo = np.zeros([1] + camera.MODELS[name][3], camera.MODELS[name][2])
    hi = np.full_like(lo, 255 if lo.dtype == np.uint8 else 1)
    y_lo, y_hi = (c.infer(name, _inputs({inp: v})).as_numpy("logits") for v in (lo, hi))
    check({inp: lo}, {"logits": y_lo}, "black frame")
    check({inp: hi}, {"logits": y_hi}, "white frame")
    assert np.max(np.abs(y_lo.astype(np.float32) - y_hi.astype(np.float32))) > 0.1, (y_lo, y_hi)
