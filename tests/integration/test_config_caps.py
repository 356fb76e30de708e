"""Config numbers that size what a load allocates are bounded (a config override arrives over the network:
RepositoryModelLoad's "config"). max_batch_size over --model-max-batch-size (65,536) and
dynamic_batching.priority_levels over --model-max-priority-levels (1,024) fail the load at once with
INVALID_ARGUMENT / HTTP 400 naming the field, the value, the bound and the flag, and the loaded generation
keeps serving (before: 16M levels held 1.3 GB, 4e9 got the process OOM-killed, max_batch_size 2^31 reserved
32 TB and one /dashboard.json held the HTTP loop 30 s). Loads just under the bounds succeed with RSS bounded,
another model and /v2/health/live unaffected, and ModelStatistics / dashboard.json / /metrics of a model
allowed 65,536 rows answer at once listing only the sizes that ran."""

import json
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib
from test_warmup_limits import CONFIG, add_model, http_live, http_load


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmRSS")


def infer(c, name, rows=1, priority=0):
    x = np.zeros((rows, 4), dtype=np.float32)
    i = grpcclient.InferInput("X", [rows, 4], "FP32")
    i.set_data_from_numpy(x)
    return c.infer(name, [i], priority=priority, client_timeout=30).as_numpy("Y")


def cfg(name, mbs, extra=""):
    return CONFIG.format(name=name, mbs=mbs, dim=4, extra=extra)


def levels(n, default=1):
    return "dynamic_batching { priority_levels: %d default_priority_level: %d }" % (n, default)


@pytest.fixture
def srv(tmp_path):
    repo = str(tmp_path)
    add_model(repo, "a", c=1.0)
    add_model(repo, "victim", c=2.0)
    s = lib.ServerProcess(repo, ["--model-control-mode", "explicit", "--load-model", "a",
                                 "--load-model", "victim"]).start()
    yield s
    if s.alive():
        s.proc.kill()
        s.proc.wait()


def test_over_the_caps_refused_naming_field_and_bound(srv):
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        assert infer(c, "a")[0, 0] == 1.0
        t0 = time.monotonic()
        with pytest.raises(InferenceServerException) as ei:
            c.load_model("a", config=cfg("a", 8, levels(1025)))
        msg = str(ei.value)
        assert "INVALID_ARGUMENT" in lib.status_name(ei.value), msg
        assert "dynamic_batching.priority_levels 1025 exceeds this server's limit of 1024" in msg, msg
        assert "--model-max-priority-levels" in msg, msg
        # 4e9 levels (the OOM kill of the report), over HTTP
        st, body = http_load(srv.http_port, "a", cfg("a", 8, levels(4000000000)))
        assert st == 400, (st, body)
        assert "dynamic_batching.priority_levels 4000000000 exceeds" in lib.rest_error(body), body
        for mbs in (65537, 2147483647):
            st, body = http_load(srv.http_port, "a", cfg("a", mbs))
            err = lib.rest_error(body)
            assert st == 400, (st, body)
            assert "max_batch_size %d exceeds this server's limit of 65536 (--model-max-batch-size)" % mbs in err, err
        with pytest.raises(InferenceServerException) as ei:
            c.load_model("a", config=cfg("a", 65537))
        assert "INVALID_ARGUMENT" in lib.status_name(ei.value), str(ei.value)
        assert time.monotonic() - t0 < 10, "the refusals took %.1f s" % (time.monotonic() - t0)
        # the refused loads left the loaded generation serving
        assert c.is_model_ready("a") and infer(c, "a")[0, 0] == 1.0
        assert c.get_model_config("a").config.max_batch_size == 8
    assert srv.stop() == 0
    srv.assert_clean_exit()


def test_just_under_the_caps_loads_and_stays_small(srv):
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        infer(c, "victim")
        before = rss_mib(srv.proc.pid)
        c.load_model("a", config=cfg("a", 65536, levels(1024, default=1024)))
        assert c.get_model_config("a").config.max_batch_size == 65536
        assert c.get_model_config("a").config.dynamic_batching.priority_levels == 1024
        grown = rss_mib(srv.proc.pid) - before
        assert grown < 256, "the load grew RSS by %.0f MiB" % grown
        # requests at the far ends of the levels and of several sizes run; only those sizes are counted
        for rows, prio in ((1, 1), (3, 1024), (3, 0), (64, 512), (1000, 700)):
            y = infer(c, "a", rows=rows, priority=prio)
            assert y.shape == (rows, 4) and float(y[0, 0]) == 1.0
        # another model and liveness keep their pace (generous bounds: a 2-core CI box)
        for _ in range(20):
            t0 = time.monotonic()
            assert float(infer(c, "victim")[0, 0]) == 2.0
            assert time.monotonic() - t0 < 2.0
        assert http_live(srv.http_port, timeout=5) == 200

        t0 = time.monotonic()
        stats = c.get_inference_statistics("a", as_json=True)
        took = time.monotonic() - t0
        assert took < 2.0, "ModelStatistics took %.1f s" % took
        (ms,) = stats["model_stats"]
        sizes = sorted(int(b["batch_size"]) for b in ms["batch_stats"])
        assert sizes == [1, 3, 64, 1000], sizes
        assert int(ms["inference_count"]) == 1 + 3 + 3 + 64 + 1000

        t0 = time.monotonic()
        st, body = lib.http_get(srv.http_url + "/dashboard.json", timeout=10)
        took = time.monotonic() - t0
        assert st == 200 and took < 2.0, (st, took)
        assert len(body) < 64 * 1024, len(body)
        (m,) = [m for m in json.loads(body)["models"] if m["name"] == "a"]
        assert sorted(s for s, _ in m["batch_sizes"]) == [1, 3, 64, 1000], m["batch_sizes"]

        t0 = time.monotonic()
        st, body = lib.http_get(srv.http_url + "/metrics", timeout=10)
        assert st == 200 and time.monotonic() - t0 < 2.0
        assert len(body) < 1024 * 1024, len(body)
        assert rss_mib(srv.proc.pid) - before < 256
    assert srv.stop() == 0
    srv.assert_clean_exit()


def test_caps_set_by_flag(tmp_path):
    repo = str(tmp_path)
    add_model(repo, "a", c=1.0)
    s = lib.ServerProcess(repo, ["--model-control-mode", "explicit", "--load-model", "a",
                                 "--model-max-batch-size", "16", "--model-max-priority-levels", "4"]).start()
    try:
        with grpcclient.InferenceServerClient(s.grpc_url) as c:
            c.load_model("a", config=cfg("a", 16, levels(4, default=4)))
            assert float(infer(c, "a", rows=16, priority=4)[0, 0]) == 1.0
            with pytest.raises(InferenceServerException) as ei:
                c.load_model("a", config=cfg("a", 17))
            assert "max_batch_size 17 exceeds this server's limit of 16" in str(ei.value)
            with pytest.raises(InferenceServerException) as ei:
                c.load_model("a", config=cfg("a", 8, levels(5)))
            assert "priority_levels 5 exceeds this server's limit of 4" in str(ei.value)
            assert c.get_model_config("a").config.max_batch_size == 16
        assert s.stop() == 0
        s.assert_clean_exit()
    finally:
        if s.alive():
            s.proc.kill()
            s.proc.wait()


@pytest.mark.parametrize("args,want", [
    (["--model-max-batch-size", "0"], "--model-max-batch-size"),
    (["--model-max-priority-levels", "0"], "--model-max-priority-levels"),
    (["--model-max-batch-size", "8", "--default-max-batch-size", "16"],
     "--default-max-batch-size (16) must be at most --model-max-batch-size (8)"),
])
def test_bad_cap_flags_refused_at_start(tmp_path, args, want):
    err = lib.start_fails(str(tmp_path), args)
    assert want in err, err


def test_statistics_sparse_for_a_huge_allowed_batch(tmp_path):
    """An operator may allow far larger batches by flag: the statistics still hold and walk only the sizes
    that ran (before: a dense table of max_batch_size entries, walked whole by every ModelStatistics,
    /metrics and dashboard.json)."""
    repo = str(tmp_path)
    add_model(repo, "a", c=1.0)
    s = lib.ServerProcess(repo, ["--model-control-mode", "explicit", "--load-model", "a",
                                 "--model-max-batch-size", "16777216"]).start()
    try:
        with grpcclient.InferenceServerClient(s.grpc_url) as c:
            before = rss_mib(s.proc.pid)
            c.load_model("a", config=cfg("a", 16777216))
            for rows in (1, 5, 5):
                assert float(infer(c, "a", rows=rows)[0, 0]) == 1.0
            for _ in range(5):
                t0 = time.monotonic()
                (ms,) = c.get_inference_statistics("a", as_json=True)["model_stats"]
                assert time.monotonic() - t0 < 2.0
                assert sorted(int(b["batch_size"]) for b in ms["batch_stats"]) == [1, 5]
                t0 = time.monotonic()
                st, body = lib.http_get(s.http_url + "/dashboard.json", timeout=10)
                assert st == 200 and time.monotonic() - t0 < 2.0 and len(body) < 64 * 1024
                assert http_live(s.http_port, timeout=5) == 200
            assert rss_mib(s.proc.pid) - before < 256
        assert s.stop() == 0
        s.assert_clean_exit()
    finally:
        if s.alive():
            s.proc.kill()
            s.proc.wait()


def test_dims_whose_full_batch_passes_1_tib_refused(tmp_path):
    """A config's dims are fixed by the override where the graph leaves them open: the scheduler sized each CPU
    executor's staging for a full batch of them at load (dims [2^40] x 8 rows reserved 32 TB of address
    space, and dims near 2^63 wrapped the size). A full batch of one tensor over 1 TiB fails the load."""
    import os
    import onnx
    from onnx import TensorProto, helper
    repo = str(tmp_path)
    g = helper.make_graph([helper.make_node("Relu", ["X"], ["Y"])], "g",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", "D"])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", "D"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(os.path.join(repo, "d", "1"))
    onnx.save(m, os.path.join(repo, "d", "1", "model.onnx"))
    tmpl = ('max_batch_size: 8\ninput [{ name: "X" data_type: TYPE_FP32 dims: [ %s ] }]\n'
            'output [{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }]\n')
    with open(os.path.join(repo, "d", "config.pbtxt"), "w") as f:
        f.write(tmpl % "-1")
    s = lib.ServerProcess(repo, ["--model-control-mode", "explicit", "--load-model", "d"]).start()
    try:
        for d in ("34359738369", "1099511627776", "9223372036854775807"):
            st, body = http_load(s.http_port, "d", tmpl % d)
            err = lib.rest_error(body)
            assert st == 400, (st, body)
            assert "input 'X': a full batch (max_batch_size 8) of its dims takes more than the 1099511627776 " \
                   "bytes (1 TiB)" in err, err
        # 34359738369 = 2^35 + 1: 8 rows of it in FP32 pass 1 TiB by 32 bytes; a sane override loads and serves
        st, body = http_load(s.http_port, "d", tmpl % "4")
        assert st == 200, body
        with grpcclient.InferenceServerClient(s.grpc_url) as c:
            i = grpcclient.InferInput("X", [2, 4], "FP32")
            i.set_data_from_numpy(-np.ones((2, 4), dtype=np.float32))
            assert float(c.infer("d", [i], client_timeout=30).as_numpy("Y").sum()) == 0.0
        assert s.stop() == 0
        s.assert_clean_exit()
    finally:
        if s.alive():
            s.proc.kill()
            s.proc.wait()
