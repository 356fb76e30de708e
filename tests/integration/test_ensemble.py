"""Ensembles (Triton's platform "ensemble" with ensemble_scheduling, issue 33) through the real server:
a chain and a diamond of small ONNX models made here with onnx.helper, over gRPC (unary and stream) and
HTTP (JSON and binary), values checked against numpy; a step's dynamic batching seen in its statistics;
bad configs refused with every reason at once; a failing step answered with its model named while the
server goes on; concurrent requests; classification on an ensemble output; client shared memory;
explicit model control loading an ensemble's composing models with it (and unload_dependents); an
ensemble of ensembles; a client's deadline and cancel reaching the steps; a stateful member's sequence;
a member that preserves ordering; /metrics and the dashboard.

Composing models (FP32 rows of 4, max_batch_size 8):
    scale   Y = 2 * X          (dynamic_batching with a 300 ms queue delay: concurrent steps batch)
    addone  Y = X + 1
    sub     Z = A - B
    fixed   Y = X              (dims [4] exactly, for a step that refuses what the ensemble lets in)
Ensembles:
    chain    IN -> scale -> addone -> OUT                  OUT = 2x + 1
    diamond  IN -> scale -> S, IN -> addone -> A, sub(S, A) -> OUT, and S as output SCALED
             OUT = x - 1, SCALED = 2x (the two branches run in parallel)
    loose    IN [-1] -> fixed -> OUT                       a row of 3 fails in the step
    outer    IN -> chain -> addone -> OUT                  an ensemble as a step: OUT = 2x + 2
    ordered_chain  IN -> ordered (addone with preserve_ordering) -> addone -> OUT = x + 2
    slow_chain     IN -> slow (scale holding a lone request 2 s) -> addone -> OUT = 2x + 1
"""

import concurrent.futures as cf
import os
import queue
import threading
import time
from functools import partial

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

F32 = TensorProto.FLOAT


def _save(repo, name, nodes, ins, outs, config, inits=(), files=None):
    d = os.path.join(repo, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    if nodes is not None:
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, F32, s) for n, s in ins],
                              [helper.make_tensor_value_info(n, F32, s) for n, s in outs], initializer=list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, os.path.join(d, "1", "model.onnx"))
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(config)
    for fn, text in (files or {}).items():
        with open(os.path.join(d, fn), "w") as f:
            f.write(text)


def _io(kind, name, dims, extra=""):
    return '%s [ { name: "%s" data_type: TYPE_FP32 dims: [ %s ] %s } ]\n' % (kind, name, ", ".join(map(str, dims)),
                                                                         extra)


def _step(model, ins, outs, version=-1):
    s = '    { model_name: "%s" model_version: %d\n' % (model, version)
    s += "".join('      input_map { key: "%s" value: "%s" }\n' % kv for kv in ins.items())
    s += "".join('      output_map { key: "%s" value: "%s" }\n' % kv for kv in outs.items())
    return s + "    }"


def _ensemble(repo, name, ins, outs, steps, max_batch=8, files=None):
    cfg = 'name: "%s"\nplatform: "ensemble"\nmax_batch_size: %d\n' % (name, max_batch)
    cfg += "input [ %s ]\n" % ", ".join('{ name: "%s" data_type: TYPE_FP32 dims: [ %s ] }' % (n, ", ".join(map(str, d)))
                                      for n, d in ins)
    cfg += "output [ %s ]\n" % ", ".join('{ name: "%s" data_type: %s dims: [ %s ] %s }'
                                       % (o[0], o[2] if len(o) > 2 else "TYPE_FP32", ", ".join(map(str, o[1])),
                                          o[3] if len(o) > 3 else "")
                                       for o in outs)
    cfg += "ensemble_scheduling {\n  step [\n%s\n  ]\n}\n" % ",\n".join(steps)
    _save(repo, name, None, None, None, cfg, files=files)


LABELS = "".join("class_%d\n" % i for i in range(4))


def write_repo(repo, bad=True):
    n = helper.make_node
    two = helper.make_tensor("two", F32, [1], [2.0])
    one = helper.make_tensor("one", F32, [1], [1.0])
    _save(repo, "scale", [n("Mul", ["X", "two"], ["Y"])], [("X", ["b", 4])], [("Y", ["b", 4])],
          'name: "scale"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + _io("input", "X", [4]) +
          _io("output", "Y", [4]) + "dynamic_batching { max_queue_delay_microseconds: 300000 }\n", [two])
    # scale again, holding a lone request 2 s: long enough for a client to cancel it while it waits, or
    # for its deadline to pass, however slow a sanitizer makes the way there
    _save(repo, "slow", [n("Mul", ["X", "two"], ["Y"])], [("X", ["b", 4])], [("Y", ["b", 4])],
          'name: "slow"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + _io("input", "X", [4]) +
          _io("output", "Y", [4]) + "dynamic_batching { max_queue_delay_microseconds: 2000000 }\n", [two])
    _save(repo, "addone", [n("Add", ["X", "one"], ["Y"])], [("X", ["b", 4])], [("Y", ["b", 4])],
          'name: "addone"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + _io("input", "X", [4]) +
          _io("output", "Y", [4]), [one])
    _save(repo, "sub", [n("Sub", ["A", "B"], ["Z"])], [("A", ["b", 4]), ("B", ["b", 4])], [("Z", ["b", 4])],
          'name: "sub"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n' +
          'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' +
          _io("output", "Z", [4]))
    _save(repo, "fixed", [n("Identity", ["X"], ["Y"])], [("X", ["b", 4])], [("Y", ["b", 4])],
          'name: "fixed"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + _io("input", "X", [4]) +
          _io("output", "Y", [4]))
    # addone again, answering in request order: its answers go out under order.c's lock, where the
    # next step must not be started (ensemble.c hands that to a reply thread)
    _save(repo, "ordered", [n("Add", ["X", "one"], ["Y"])], [("X", ["b", 4])], [("Y", ["b", 4])],
          'name: "ordered"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + _io("input", "X", [4]) +
          _io("output", "Y", [4]) + "dynamic_batching { preserve_ordering: true }\n"
          'instance_group [ { kind: KIND_CPU count: 2 } ]\n', [one])
    _ensemble(repo, "ordered_chain", [("IN", [4])], [("OUT", [4])],
              [_step("ordered", {"X": "IN"}, {"Y": "mid"}), _step("addone", {"X": "mid"}, {"Y": "OUT"})])
    _ensemble(repo, "slow_chain", [("IN", [4])], [("OUT", [4])],
              [_step("slow", {"X": "IN"}, {"Y": "mid"}), _step("addone", {"X": "mid"}, {"Y": "OUT"})])
    _ensemble(repo, "chain", [("IN", [4])], [("OUT", [4], "TYPE_FP32", 'label_filename: "labels.txt"')],
              [_step("scale", {"X": "IN"}, {"Y": "scaled"}), _step("addone", {"X": "scaled"}, {"Y": "OUT"})],
              files={"labels.txt": LABELS})
    # steps listed out of order: the dataflow, not the list, decides when each runs
    _ensemble(repo, "diamond", [("IN", [4])], [("OUT", [4]), ("SCALED", [4])],
              [_step("sub", {"A": "SCALED", "B": "plus"}, {"Z": "OUT"}),
               _step("scale", {"X": "IN"}, {"Y": "SCALED"}), _step("addone", {"X": "IN"}, {"Y": "plus"})])
    _ensemble(repo, "loose", [("IN", [-1])], [("OUT", [-1])], [_step("fixed", {"X": "IN"}, {"Y": "OUT"})])
    _ensemble(repo, "outer", [("IN", [4])], [("OUT", [4])],
              [_step("chain", {"IN": "IN"}, {"OUT": "mid"}), _step("addone", {"X": "mid"}, {"Y": "OUT"})])
    # a stateful member: the running sum of a sequence's inputs (test_sequence.py's accumulator), under an
    # ensemble whose requests carry the sequence's parameters on to it
    import pathlib
    import test_sequence
    test_sequence.write_accumulator(pathlib.Path(repo), "acc", "")
    _save(repo, "acc_ens", None, None, None,
          'name: "acc_ens"\nplatform: "ensemble"\nmax_batch_size: 8\n'
          'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
          'output [ { name: "SUM" data_type: TYPE_INT64 dims: [ 1 ] } ]\n'
          'ensemble_scheduling { step [ { model_name: "acc" model_version: -1 input_map { key: "INPUT" value: "IN" } '
          'output_map { key: "OUTPUT" value: "SUM" } } ] }\n')
    if not bad:
        return
    # bad ones: each names every one of its problems
    _ensemble(repo, "bad_refs", [("IN", [4]), ("UNUSED", [4])], [("OUT", [4]), ("NEVER", [4])],
              [_step("no_such_model", {"X": "IN"}, {"Y": "t1"}),
               _step("addone", {"NOPE": "IN"}, {"Y": "OUT"}),
               _step("scale", {"X": "ghost"}, {"Y": "t2"})])
    _ensemble(repo, "bad_flow", [("IN", [4])], [("OUT", [4])],
              [_step("addone", {"X": "IN"}, {"Y": "OUT"}), _step("scale", {"X": "IN"}, {"Y": "OUT"}),
               _step("sub", {"A": "c1", "B": "IN"}, {"Z": "c2"}), _step("sub", {"A": "c2", "B": "IN"}, {"Z": "c1"})])
    _ensemble(repo, "bad_types", [("IN", [3])], [("OUT", [4], "TYPE_INT64")],
              [_step("addone", {"X": "IN"}, {"Y": "OUT"})], max_batch=16)


BAD = {
    "bad_refs": ["step 0: composing model 'no_such_model' is not available",
                 "input_map key 'NOPE' is not an input of model 'addone'",
                 "input 'X' of model 'addone' is not mapped",
                 "tensor 'ghost' (input 'X' of step 2, model 'scale') is neither an ensemble input nor any step's output",
                 "ensemble input 'UNUSED' is not consumed by any step",
                 "ensemble output 'NEVER' is not produced by any step"],
    "bad_flow": ["tensor 'OUT' is produced twice: by step 0 ('addone') and by step 1 ('scale')",
                 "steps 2 ('sub'), 3 ('sub') depend on each other's outputs (a cycle)"],
    "bad_types": ["the ensemble's max_batch_size 16 exceeds its composing model's ('addone' 8)",
                  "tensor 'IN': ensemble input 'IN' has shape [-1,3] but input 'X' of model 'addone' (step 0) takes "
                  "shape [-1,4]",
                  "tensor 'OUT': output 'Y' of model 'addone' is TYPE_FP32 but ensemble output 'OUT' takes TYPE_INT64"],
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("ensembles"))
    write_repo(d)
    return d


@pytest.fixture(scope="module")
def srv(repo):
    yield from lib.served(repo, ["--strict-readiness", "false", "--allow-client-shm", "true"])


@pytest.fixture(scope="module")
def gc(srv):
    yield from lib.grpc_client(srv)


@pytest.fixture(scope="module")
def hc(srv):
    c = httpclient.InferenceServerClient(url=srv.http_url.split("://", 1)[-1], concurrency=4)
    yield c
    c.close()


def _x(rows=1, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, 4)).astype(np.float32)


def _grpc(gc, model, x, outputs=None):
    inp = grpcclient.InferInput("IN", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    outs = [grpcclient.InferRequestedOutput(o) for o in outputs] if outputs else None
    return gc.infer(model, [inp], outputs=outs)


def test_chain_and_diamond_values(gc):
    x = _x(3, 1)
    np.testing.assert_allclose(_grpc(gc, "chain", x).as_numpy("OUT"), 2 * x + 1, rtol=1e-6)
    r = _grpc(gc, "diamond", x)
    np.testing.assert_allclose(r.as_numpy("OUT"), x - 1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r.as_numpy("SCALED"), 2 * x, rtol=1e-6)
    # only what was asked for comes back
    r = _grpc(gc, "diamond", x, ["SCALED"])
    assert r.as_numpy("OUT") is None
    np.testing.assert_allclose(r.as_numpy("SCALED"), 2 * x, rtol=1e-6)
    np.testing.assert_allclose(_grpc(gc, "outer", x).as_numpy("OUT"), 2 * x + 2, rtol=1e-6)


def test_http_json_and_binary(hc):
    x = _x(2, 2)
    for binary in (False, True):
        inp = lib.http_infer_inputs({"IN": x}, binary)
        r = hc.infer("diamond", inp, outputs=[httpclient.InferRequestedOutput("OUT", binary_data=binary)])
        np.testing.assert_allclose(r.as_numpy("OUT"), x - 1, rtol=1e-5, atol=1e-6)


def test_stream(gc):
    got = queue.Queue()
    gc.start_stream(callback=lambda result, error: got.put((result, error)))
    try:
        xs = [_x(1, 10 + i) for i in range(4)]
        for i, x in enumerate(xs):
            inp = grpcclient.InferInput("IN", [1, 4], "FP32")
            inp.set_data_from_numpy(x)
            gc.async_stream_infer("chain", [inp], request_id=str(i))
        for _ in xs:
            result, error = got.get(timeout=30)
            assert error is None, error
            i = int(result.get_response().id)
            np.testing.assert_allclose(result.as_numpy("OUT"), 2 * xs[i] + 1, rtol=1e-6)
    finally:
        gc.stop_stream()


def test_metadata_config_index(gc, hc):
    md = gc.get_model_metadata("diamond")
    assert md.platform == "ensemble" and list(md.versions) == ["1"], md
    assert [(t.name, t.datatype, list(t.shape)) for t in md.inputs] == [("IN", "FP32", [-1, 4])]
    assert [t.name for t in md.outputs] == ["OUT", "SCALED"]
    cfg = gc.get_model_config("diamond", as_json=True)["config"]
    assert cfg["platform"] == "ensemble"
    steps = cfg["ensemble_scheduling"]["step"]
    assert [s["model_name"] for s in steps] == ["sub", "scale", "addone"]
    assert steps[0]["input_map"] == {"A": "SCALED", "B": "plus"}
    hmd = hc.get_model_metadata("chain")
    assert hmd["platform"] == "ensemble", hmd
    hcfg = hc.get_model_config("diamond")
    assert hcfg["platform"] == "ensemble", hcfg
    assert [s["model_name"] for s in hcfg["ensemble_scheduling"]["step"]] == ["sub", "scale", "addone"], hcfg
    assert hcfg["ensemble_scheduling"]["step"][0]["input_map"] == {"A": "SCALED", "B": "plus"}, hcfg
    assert hcfg["ensemble_scheduling"]["step"][1]["model_version"] in (-1, "-1"), hcfg
    assert gc.is_model_ready("chain") and hc.is_model_ready("diamond")
    idx = {(m.name, m.state) for m in gc.get_model_repository_index().models}
    for name in ("chain", "diamond", "outer", "scale"):
        assert (name, "READY") in idx, idx
    for name in BAD:
        assert (name, "UNAVAILABLE") in idx, idx


@pytest.mark.parametrize("model", sorted(BAD))
def test_bad_configs_name_every_reason(gc, srv, model):
    entries = [m for m in gc.get_model_repository_index().models if m.name == model]
    assert len(entries) == 1 and entries[0].state == "UNAVAILABLE", entries
    for reason in BAD[model]:
        assert reason in entries[0].reason, (reason, entries[0].reason)
    with pytest.raises(InferenceServerException) as ei:
        _grpc(gc, model, _x())
    assert "has no available versions" in ei.value.message() and BAD[model][0] in ei.value.message(), ei.value


def test_step_failure_is_named_and_server_lives(gc, hc):
    x = np.ones((1, 3), np.float32)
    with pytest.raises(InferenceServerException) as ei:
        _grpc(gc, "loose", x)
    msg = ei.value.message()
    assert "in ensemble 'loose', step 0 (model 'fixed') failed" in msg and "input 'X'" in msg, msg
    assert ei.value.status() == "StatusCode.INVALID_ARGUMENT", ei.value.status()
    with pytest.raises(InferenceServerException) as ei:
        hc.infer("loose", lib.http_infer_inputs({"IN": x}, True))
    assert "model 'fixed'" in ei.value.message(), ei.value
    # the same ensemble serves a request its step takes, and the others go on
    np.testing.assert_allclose(_grpc(gc, "loose", np.ones((1, 4), np.float32)).as_numpy("OUT"), 1.0)
    # a request the ensemble itself refuses is checked against the ensemble's config
    with pytest.raises(InferenceServerException) as ei:
        _grpc(gc, "chain", np.ones((1, 5), np.float32))
    assert "input 'IN'" in ei.value.message() and "model 'chain'" not in ei.value.message()


def test_concurrent_requests_batch_their_steps(gc, srv):
    before_scale = lib.model_stats(gc, "scale")
    before_chain = lib.model_stats(gc, "chain")
    n = 8
    xs = [_x(1, 100 + i) for i in range(n)]
    barrier = threading.Barrier(n)

    def one(i):
        c = grpcclient.InferenceServerClient(url=srv.grpc_url)
        try:
            barrier.wait(timeout=30)
            return _grpc(c, "chain", xs[i]).as_numpy("OUT")
        finally:
            c.close()

    with cf.ThreadPoolExecutor(n) as pool:
        outs = list(pool.map(one, range(n)))
    for i in range(n):
        np.testing.assert_allclose(outs[i], 2 * xs[i] + 1, rtol=1e-6)
    after_scale = lib.model_stats(gc, "scale")
    after_chain = lib.model_stats(gc, "chain")
    # every step request counted on its model; scale's 300 ms queue delay gathered them into fewer batches
    assert after_scale.inference_stats.success.count - before_scale.inference_stats.success.count == n
    assert after_scale.inference_count - before_scale.inference_count == n
    executions = after_scale.execution_count - before_scale.execution_count
    assert 1 <= executions < n, executions
    assert after_chain.inference_stats.success.count - before_chain.inference_stats.success.count == n
    assert after_chain.inference_count - before_chain.inference_count == n


def test_many_concurrent_values(srv):
    def one(i):
        c = grpcclient.InferenceServerClient(url=srv.grpc_url)
        try:
            x = _x(1 + i % 3, 1000 + i)
            r = _grpc(c, "diamond", x)
            np.testing.assert_allclose(r.as_numpy("OUT"), x - 1, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(r.as_numpy("SCALED"), 2 * x, rtol=1e-6)
            return True
        finally:
            c.close()

    with cf.ThreadPoolExecutor(12) as pool:
        assert all(pool.map(one, range(48)))


def test_classification_on_ensemble_output(gc):
    x = np.array([[0.5, -1.0, 3.0, 0.25]], np.float32)
    r = gc.infer("chain", [_inp(x)], outputs=[grpcclient.InferRequestedOutput("OUT", class_count=2)])
    got = [s.decode() for s in r.as_numpy("OUT").reshape(-1)]
    # OUT = 2x + 1 = [2, -1, 7, 1.5]: classes 2 then 0, labels from the ensemble's own file
    assert got == ["7.000000:2:class_2", "2.000000:0:class_0"], got


def _inp(x):
    i = grpcclient.InferInput("IN", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return i


def test_system_shared_memory(gc):
    import tritonclient.utils.shared_memory as shm
    x = _x(2, 7)
    nbytes = x.nbytes
    key = "/inferd_ens_%d" % os.getpid()
    h = shm.create_shared_memory_region("ens_io", key, 2 * nbytes)
    try:
        shm.set_shared_memory_region(h, [x])
        gc.register_system_shared_memory("ens_io", key, 2 * nbytes)
        inp = grpcclient.InferInput("IN", [2, 4], "FP32")
        inp.set_shared_memory("ens_io", nbytes)
        out = grpcclient.InferRequestedOutput("OUT")
        out.set_shared_memory("ens_io", nbytes, offset=nbytes)
        gc.infer("chain", [inp], outputs=[out])
        got = shm.get_contents_as_numpy(h, np.float32, [2, 4], offset=nbytes)
        np.testing.assert_allclose(got, 2 * x + 1, rtol=1e-6)
    finally:
        gc.unregister_system_shared_memory("ens_io")
        shm.destroy_shared_memory_region(h)


def test_explicit_mode_loads_members(tmp_path):
    d = str(tmp_path)
    write_repo(d, bad=False)
    for s in lib.served(d, ["--model-control-mode", "explicit"]):
        c = grpcclient.InferenceServerClient(url=s.grpc_url)
        try:
            assert not c.is_model_ready("scale")
            c.load_model("outer")  # its members, the ensemble chain's members with them
            for name in ("outer", "chain", "scale", "addone"):
                assert c.is_model_ready(name), name
            assert not c.is_model_ready("sub")
            x = _x(2, 3)
            np.testing.assert_allclose(_grpc(c, "outer", x).as_numpy("OUT"), 2 * x + 2, rtol=1e-6)
            # a member unloaded under the ensemble: its step fails, naming it; loading it again heals
            c.unload_model("addone")
            with pytest.raises(InferenceServerException) as ei:
                _grpc(c, "chain", x)
            assert "model 'addone'" in ei.value.message(), ei.value
            c.load_model("addone")
            np.testing.assert_allclose(_grpc(c, "chain", x).as_numpy("OUT"), 2 * x + 1, rtol=1e-6)
            # unload_dependents: the ensembles naming scale go with it, and the ensemble naming those
            c.unload_model("scale", unload_dependents=True)
            for name in ("scale", "chain", "outer"):
                assert not c.is_model_ready(name), name
            assert c.is_model_ready("addone")
            # over HTTP too, and without it the ensemble stays
            h = httpclient.InferenceServerClient(url=s.http_url.split("://", 1)[-1])
            try:
                h.load_model("outer")
                assert h.is_model_ready("outer") and h.is_model_ready("scale")
                h.unload_model("addone")
                assert h.is_model_ready("chain") and not h.is_model_ready("addone")
                h.unload_model("scale", unload_dependents=True)
                assert not h.is_model_ready("chain") and not h.is_model_ready("outer")
                st, _, body = lib.http_call(s, "POST", "/v2/repository/models/sub/unload", b"nope")
                assert st == 400 and "the unload body must be JSON" in lib.rest_error(body), (st, body)
            finally:
                h.close()
        finally:
            c.close()


def test_deadline_reaches_the_steps(gc):
    """A client deadline (300 ms) shorter than slow's 2 s queue delay: the step request inherits it, leaves slow's
    queue at its deadline without running, nothing runs after it, and the ensemble answers DEADLINE_EXCEEDED."""
    before = lib.model_stats(gc, "slow")
    before_add = lib.model_stats(gc, "addone")
    with pytest.raises(InferenceServerException) as ei:
        gc.infer("slow_chain", [_inp(_x())], client_timeout=0.3)
    assert ei.value.status() == "StatusCode.DEADLINE_EXCEEDED", ei.value
    _await(lambda: lib.model_stats(gc, "slow").inference_stats.fail.count > before.inference_stats.fail.count)
    after = lib.model_stats(gc, "slow")
    assert after.inference_stats.fail.count == before.inference_stats.fail.count + 1, after
    assert after.inference_stats.success.count == before.inference_stats.success.count, after
    assert after.execution_count == before.execution_count, after
    assert lib.model_stats(gc, "addone").inference_stats.success.count == before_add.inference_stats.success.count
    x = _x(1, 5)
    np.testing.assert_allclose(_grpc(gc, "chain", x).as_numpy("OUT"), 2 * x + 1, rtol=1e-6)


def test_metrics_and_dashboard(gc, srv):
    """The ensemble and its members in /metrics (Triton's names) and the dashboard's JSON."""
    _grpc(gc, "chain", _x())
    samples = lib.scrape_metrics(srv)
    assert lib.metric_sum(samples, "nv_inference_request_success", model="chain") >= 1
    assert lib.metric_sum(samples, "nv_inference_request_success", model="addone") >= 1
    st, body = lib.http_get(srv.http_url + "/dashboard.json", timeout=10)
    assert st == 200 and '"chain"' in body, (st, body[:300])


def test_step_after_an_ordered_model(srv):
    """A step whose model preserves ordering answers under order.c's lock; the next step starts on another
    thread, so concurrent requests neither deadlock nor mix their values."""
    def one(i):
        c = grpcclient.InferenceServerClient(url=srv.grpc_url)
        try:
            x = _x(1 + i % 2, 500 + i)
            np.testing.assert_allclose(_grpc(c, "ordered_chain", x).as_numpy("OUT"), x + 2, rtol=1e-6)
            return True
        finally:
            c.close()

    with cf.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(one, range(40)))


def test_load_model_flag_loads_members(tmp_path):
    """--load-model names the ensemble alone: its members (an ensemble's too) load with it at start."""
    d = str(tmp_path)
    write_repo(d, bad=False)
    for s in lib.served(d, ["--model-control-mode", "explicit", "--load-model", "outer"]):
        c = grpcclient.InferenceServerClient(url=s.grpc_url)
        try:
            for name in ("outer", "chain", "scale", "addone"):
                assert c.is_model_ready(name), name
            assert not c.is_model_ready("sub")
            x = _x(1, 9)
            np.testing.assert_allclose(_grpc(c, "outer", x).as_numpy("OUT"), 2 * x + 2, rtol=1e-6)
        finally:
            c.close()


def test_sequence_through_an_ensemble(gc):
    """sequence_id, sequence_start and sequence_end reach the stateful member: two interleaved sequences keep
    their own running sums."""
    def step(sid, v, start=False, end=False):
        i = grpcclient.InferInput("IN", [1, 1], "INT32")
        i.set_data_from_numpy(np.array([[v]], np.int32))
        return int(gc.infer("acc_ens", [i], sequence_id=sid, sequence_start=start, sequence_end=end)
                   .as_numpy("SUM")[0, 0])

    assert step(71, 5, start=True) == 5
    assert step(72, 100, start=True) == 100
    assert step(71, 6) == 11
    assert step(72, 1) == 101
    assert step(71, 7, end=True) == 18
    assert step(72, 2, end=True) == 103
    # without a correlation ID the member refuses, and the ensemble says so naming it
    with pytest.raises(InferenceServerException) as ei:
        step(0, 1)
    assert "step 0 (model 'acc') failed" in ei.value.message(), ei.value


def _await(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "condition not met in %.0f s" % timeout
        time.sleep(0.01)


def test_client_cancel_reaches_the_steps(gc, srv):
    """A client cancel while the first step waits in slow's 2 s queue: the step leaves the queue without
    running (counted failed on slow), nothing runs after it, and the server goes on."""
    before = lib.model_stats(gc, "slow")
    before_add = lib.model_stats(gc, "addone")
    got = queue.Queue()
    ctx = gc.async_infer("slow_chain", [_inp(_x())], callback=lambda result, error: got.put((result, error)))
    # the step is queued at slow once the metric says so
    _await(lambda: lib.metric_sum(lib.scrape_metrics(srv), "nv_inference_pending_request_count", model="slow") >= 1)
    ctx.cancel()
    result, error = got.get(timeout=10)
    assert result is None and error is not None and "CANCELLED" in str(error.status()), (result, error)
    _await(lambda: lib.model_stats(gc, "slow").inference_stats.fail.count > before.inference_stats.fail.count)
    after = lib.model_stats(gc, "slow")
    assert after.inference_stats.success.count == before.inference_stats.success.count, after
    assert after.execution_count == before.execution_count, after
    assert lib.model_stats(gc, "addone").inference_stats.success.count == before_add.inference_stats.success.count
    x = _x(1, 6)
    np.testing.assert_allclose(_grpc(gc, "chain", x).as_numpy("OUT"), 2 * x + 1, rtol=1e-6)


def test_poll_mode_ensemble_waits_for_its_member(tmp_path):
    """Poll mode: an ensemble whose member is not in the repository fails (UNAVAILABLE, naming it); once the
    member's folder appears, the next poll loads it and then the ensemble, its own files unchanged."""
    import shutil
    full = str(tmp_path / "full")
    write_repo(full, bad=False)
    d = str(tmp_path / "repo")
    os.makedirs(d)
    for name in ("chain", "scale"):
        shutil.copytree(os.path.join(full, name), os.path.join(d, name))
    for s in lib.served(d, ["--model-control-mode", "poll", "--repository-poll-secs", "1",
                            "--strict-readiness", "false"]):
        c = grpcclient.InferenceServerClient(url=s.grpc_url)
        try:
            assert not c.is_model_ready("chain")
            entry = [m for m in c.get_model_repository_index().models if m.name == "chain"][0]
            assert "composing model 'addone' is not available" in entry.reason, entry
            # whole at once (a rename), so no poll sees it half copied
            shutil.copytree(os.path.join(full, "addone"), str(tmp_path / "addone"))
            os.rename(str(tmp_path / "addone"), os.path.join(d, "addone"))
            _await(lambda: c.is_model_ready("chain"), timeout=20)
            x = _x(1, 4)
            np.testing.assert_allclose(_grpc(c, "chain", x).as_numpy("OUT"), 2 * x + 1, rtol=1e-6)
        finally:
            c.close()
