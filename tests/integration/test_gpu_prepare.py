"""Batch sizes prepared at load on a GPU (issue 32, engine/cuda/plan_cuda_prep.c): a served model is ready
only once its GPU instance prepared its batch sizes, after which a sweep of every batch size 1..max_batch_size
(each its own batch) answers as onnxruntime does and prepares nothing on the request path:
inferd_lazy_prepares_total stays 0 and the instance captures no new CUDA graph. With a budget of 0 s only 1,
the preferred sizes and the largest are prepared, and every other size runs padded to the next of them.
Two instances of one model prepare in parallel (one thread each).

Skipped where no GPU is visible (INFERD_TEST_GPU=0 skips it anyway, =1 runs it without looking) and where
the binary was built without CUDA. The CPU side of the same logic: test_prepare.py."""

import os
import re

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferd_testlib as lib


_SKIP = lib.gpu_skip_reason()
if _SKIP:
    pytest.skip(_SKIP, allow_module_level=True)

g = lib.gen_models
MBS = 16
GPU1 = "instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]"
GPU2 = "instance_group [ { count: 2, kind: KIND_GPU, gpus: [ 0 ] } ]"


def _convnet(name):
    """Conv+Relu, Conv, a residual Add, global pooling and a Gemm: cuDNN, the layout choice and cuBLASLt."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["X", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"]),
             helper.make_node("GlobalAveragePool", ["s"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["Y"], transB=1)]
    inits = [g._init("w1", g._w(rng, 16, 3, 3, 3)), g._init("b1", g._w(rng, 16, fan_in=1)),
             g._init("w2", g._w(rng, 16, 16, 3, 3)), g._init("b2", g._w(rng, 16, fan_in=1)),
             g._init("wf", g._w(rng, 10, 16)), g._init("bf", g._w(rng, 10, fan_in=1))]
    return g._model(name, nodes, [g._vi("X", TensorProto.FLOAT, [None, 3, 16, 16])],
                    [g._vi("Y", TensorProto.FLOAT, [None, 10])], inits)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    def add(r):
        io_in, io_out = [g._io("X", "FP32", [3, 16, 16])], [g._out("Y", "FP32", [10])]
        r.add("gp_all", MBS, io_in, io_out, {1: _convnet("gp_all")}, config_extra=GPU2, rtol=1e-4)
        r.add("gp_few", MBS, io_in, io_out, {1: _convnet("gp_few")}, rtol=1e-4,
              config_extra=GPU1 + "\ndynamic_batching { preferred_batch_size: [ 4 ] }")
    return lib.generated_repo(tmp_path_factory, "gpu_prep_repo", [add])


def _server(repo, args):
    srv = lib.ServerProcess(repo[0], args)
    try:
        srv.start()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    if "built without CUDA" in srv.stderr_text():
        srv.stop()
        pytest.skip("%s was built without CUDA" % srv.binary)
    return srv


def _sweep(srv, repo, name):
    d, specs = repo
    oracle = lib.Oracle(d, specs)
    rng = np.random.default_rng(lib.seed_from_env())
    import tritonclient.grpc as grpcclient
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    try:
        for n in range(1, MBS + 1):
            feeds = lib.random_inputs(specs[name], rng, batch=n)
            _, got = lib.infer(c, name, feeds)
            assert got["Y"].shape == (n, 10), (name, n, got["Y"].shape)
            lib.check_outputs(got, oracle.run(name, feeds), specs[name], what="%s batch %d" % (name, n))
    finally:
        c.close()


def _metric(samples, name, model):
    return lib.metric_sum(samples, name, model=model, version="1")


def test_every_size_prepared_nothing_lazy(repo):
    srv = _server(repo, ["--model-prepare-budget-s", "600"])
    try:
        m0 = lib.scrape_metrics(srv)
        for inst in ("0", "1"):  # two instances, each prepared every size
            assert lib.metric_sum(m0, "inferd_instance_prepared_batch_sizes", model="gp_all", model_instance=inst) == MBS
        graphs0 = _metric(m0, "inferd_instance_cuda_graphs", "gp_all")
        for _ in range(2):  # twice: both instances meet sizes
            _sweep(srv, repo, "gp_all")
        m1 = lib.scrape_metrics(srv)
        assert _metric(m1, "inferd_lazy_prepares_total", "gp_all") == 0
        assert _metric(m1, "inferd_padded_batches_total", "gp_all") == 0
        assert _metric(m1, "inferd_instance_cuda_graphs", "gp_all") == graphs0
        lines = [l for l in srv.stderr_text().splitlines() if "gp_all" in l and "prepared in" in l]
        assert len(lines) == 2 and all("%d batch size(s) of 1..%d" % (MBS, MBS) in l for l in lines), lines
    finally:
        srv.stop()
        srv.assert_clean_exit()


def test_no_budget_pads_to_the_must_haves(repo):
    """--model-prepare-budget-s 0: 1, the preferred 4 and 16 prepared; 2, 3 run at 4 and 5..15 at 16."""
    srv = _server(repo, ["--model-prepare-budget-s", "0"])
    try:
        m0 = lib.scrape_metrics(srv)
        assert lib.metric_sum(m0, "inferd_instance_prepared_batch_sizes", model="gp_few") == 3
        graphs0 = _metric(m0, "inferd_instance_cuda_graphs", "gp_few")
        _sweep(srv, repo, "gp_few")
        m1 = lib.scrape_metrics(srv)
        assert _metric(m1, "inferd_lazy_prepares_total", "gp_few") == 0
        assert _metric(m1, "inferd_padded_batches_total", "gp_few") == 2 + 11
        assert _metric(m1, "inferd_padded_rows_total", "gp_few") == (2 + 1) + sum(16 - n for n in range(5, 16))
        assert _metric(m1, "inferd_instance_cuda_graphs", "gp_few") == graphs0
    finally:
        srv.stop()
        srv.assert_clean_exit()
