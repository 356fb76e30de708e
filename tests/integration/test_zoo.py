"""The models users bring, as torch's own exporters wrote them: torchvision classifiers and the
seeds' CNN (tests/models/zoo/graphs, exported by export_zoo.py with the TorchScript-based exporter
at opsets 13 and 17 and the dynamo exporter at opset 18; weights filled here by fill.py), served by
the real server and checked against onnxruntime, one request alone and several batched together.

INFERD_ZOO=all serves every exported vision graph (vgg11's three are 0.5 GB each, left out by
default to keep CI's disk and time small); INFERD_ZOO=name[,name] picks some.
"""

import concurrent.futures as cf
import os
import sys

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

import inferd_testlib as lib

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "models", "zoo"))
import fill  # noqa: E402

DEFAULT = ["seedcnn.ts17", "seedcnn.dynamo18", "resnet18", "resnet50.dynamo18", "mobilenet_v3_small",
           "mobilenet_v3_large.ts17", "efficientnet_b0.ts13", "efficientnet_b0.dynamo18"]
VISION = ["seedcnn", "resnet18", "resnet50", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "vgg11"]
RTOL = 1e-4  # normwise (see lib.assert_close); convolution sums in other orders than onnxruntime's MLAS


def _wanted():
    env = os.environ.get("INFERD_ZOO", "")
    if env == "all":
        return fill.select(VISION)
    return fill.select(env.split(",") if env else DEFAULT)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("zoo_repo"))
    spec = fill.write_repo(d, _wanted(), max_batch=4)
    srv_gen = lib.served(d, ["--strict-readiness", "false"])
    srv = next(srv_gen)
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    sessions = {}
    yield d, spec, srv, c, sessions
    c.close()
    next(srv_gen, None)


def _session(zoo, name):
    import onnxruntime as ort
    d, _, _, _, sessions = zoo
    if name not in sessions:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        sessions[name] = ort.InferenceSession(os.path.join(d, name, "1", "model.onnx"), opts,
                                              providers=["CPUExecutionProvider"])
    return sessions[name]


def _feeds(spec, rng, rows):
    return {i["name"]: rng.standard_normal([rows] + i["dims"][1:]).astype(np.float32) for i in spec["inputs"]}


def _check(zoo, name, feeds, got, what):
    want = dict(zip([o.name for o in _session(zoo, name).get_outputs()], _session(zoo, name).run(None, feeds)))
    assert sorted(got) == sorted(want), (what, sorted(got), sorted(want))
    for k in want:
        lib.assert_close(got[k], want[k], RTOL, what="%s %s %s" % (name, what, k))
        assert np.std(want[k]) > 0, "%s: the oracle's output is constant, the comparison proves nothing" % name


@pytest.mark.parametrize("graph", _wanted())
def test_zoo_model_serves_like_onnxruntime(zoo, rng, graph):
    d, spec, srv, c, _ = zoo
    name = graph.replace(".", "_")
    if not c.is_model_ready(name):
        reason = [line for line in srv.lines if name in line and ("fail" in line or "error" in line.lower())]
        pytest.fail("%s did not load: %s" % (name, reason[-3:]), pytrace=False)
    s = spec[name]
    # one request alone
    feeds = _feeds(s, rng, 1)
    _, got = lib.infer(c, name, feeds)
    _check(zoo, name, feeds, got, "batch 1")
    # three requests at once (1, 2 and 1 rows): batched by the dynamic batcher, each answered with its rows
    reqs = [_feeds(s, rng, r) for r in (1, 2, 1)]
    with cf.ThreadPoolExecutor(3) as ex:
        answers = list(ex.map(lambda f: lib.infer(grpcclient.InferenceServerClient(url=srv.grpc_url), name, f)[1],
                              reqs))
    for i, (f, got) in enumerate(zip(reqs, answers)):
        _check(zoo, name, f, got, "request %d of 3 in flight" % i)
