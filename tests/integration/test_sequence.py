"""Sequence batching (Triton's stateful models, issue 33) through the real server, with tritonclient
over gRPC (stream and unary) and HTTP: correlation IDs as numbers and strings, the START/END/READY/
CORRID control inputs filled by the server, Direct and Oldest strategies, the refusals in Triton's
wording, and max_sequence_idle_microseconds freeing a slot.

The models are made here with the onnx package. Each reports its control inputs in its outputs, so
every answer shows what the server fed it:
    OUTPUT = READY * (INPUT + 100 * START + 10000 * END)    (INT64 arithmetic)
    CORR   = CORRID                                          (as INT64)
Like Triton's example models the graphs keep no state: the client accumulates, as Triton's
simple_*_sequence_* examples check (the first answer of a sequence is its input plus the START).
"""

import concurrent.futures as cf
import queue
import threading
import time
import uuid
from functools import partial

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

WAIT_S = 30
I32, I64, U64, F32, BOOL = TensorProto.INT32, TensorProto.INT64, TensorProto.UINT64, TensorProto.FLOAT, \
    TensorProto.BOOL


def _control(name, kind, body):
    return '{ name: "%s" control [{ kind: %s %s }] }' % (name, kind, body)


def write_model(repo, name, seq_block, controls, instances=1, max_batch=8):
    """controls: {START/END/READY: onnx type of the flag} and CORRID (UINT64) when present."""
    n = helper.make_node
    nodes = [n("Cast", ["INPUT"], ["x"], to=I64)]
    inputs = [helper.make_tensor_value_info("INPUT", I32, ["b", 1])]
    outputs = [helper.make_tensor_value_info("OUTPUT", I64, ["b", 1])]
    terms = ["x"]
    for c, scale in (("START", 100), ("END", 10000)):
        if c in controls:
            inputs.append(helper.make_tensor_value_info(c, controls[c], ["b", 1]))
            nodes += [n("Cast", [c], [c + "_i"], to=I64),
                      n("Mul", [c + "_i", "k" + c], [c + "_s"])]
            terms.append(c + "_s")
    acc = terms[0]
    for i, t in enumerate(terms[1:]):
        nodes.append(n("Add", [acc, t], ["acc%d" % i]))
        acc = "acc%d" % i
    inits = [helper.make_tensor("kSTART", I64, [1], [100]), helper.make_tensor("kEND", I64, [1], [10000])]
    if "READY" in controls:
        inputs.append(helper.make_tensor_value_info("READY", controls["READY"], ["b", 1]))
        nodes += [n("Cast", ["READY"], ["ready_i"], to=I64), n("Mul", ["ready_i", acc], ["OUTPUT"])]
    else:
        nodes.append(n("Identity", [acc], ["OUTPUT"]))
    if "CORRID" in controls:
        inputs.append(helper.make_tensor_value_info("CORRID", U64, ["b", 1]))
        outputs.append(helper.make_tensor_value_info("CORR", I64, ["b", 1]))
        nodes.append(n("Cast", ["CORRID"], ["CORR"], to=I64))
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    d = repo / name
    (d / "1").mkdir(parents=True)
    onnx.save(m, str(d / "1" / "model.onnx"))
    kinds = {"START": "CONTROL_SEQUENCE_START", "END": "CONTROL_SEQUENCE_END", "READY": "CONTROL_SEQUENCE_READY"}
    values = {I32: "int32_false_true: [0, 1]", F32: "fp32_false_true: [0, 1]", BOOL: "bool_false_true: [false, true]"}
    ctl = [_control(c, kinds[c], values[t]) for c, t in controls.items() if c != "CORRID"]
    if "CORRID" in controls:
        ctl.append(_control("CORRID", "CONTROL_SEQUENCE_CORRID", "data_type: TYPE_UINT64"))
    outs = '{ name: "OUTPUT" data_type: TYPE_INT64 dims: [1] }'
    if "CORRID" in controls:
        outs += ', { name: "CORR" data_type: TYPE_INT64 dims: [1] }'
    (d / "config.pbtxt").write_text(
        'name: "%s"\nplatform: "onnxruntime_onnx"\nmax_batch_size: %d\n'
        "sequence_batching { %s control_input [ %s ] }\n"
        'input [{ name: "INPUT" data_type: TYPE_INT32 dims: [1] }]\noutput [ %s ]\n'
        "instance_group [{ kind: KIND_CPU count: %d }]\n"
        % (name, max_batch, seq_block, ", ".join(ctl), outs, instances))


ALL = {"START": I32, "END": I32, "READY": I32, "CORRID": U64}


def write_accumulator(repo, name, seq_block, instances=1):
    """Implicit state: OUTPUT = ACC = ACC_IN + INPUT (INT64), the state ACC_IN/ACC_OUT kept by the server,
    zeros at each START: the running sum of the sequence's inputs, as Triton's accumulator examples."""
    n = helper.make_node
    nodes = [n("Cast", ["INPUT"], ["x"], to=I64), n("Add", ["ACC_IN", "x"], ["acc"]),
             n("Identity", ["acc"], ["ACC_OUT"]), n("Identity", ["acc"], ["OUTPUT"])]
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("INPUT", I32, ["b", 1]),
                           helper.make_tensor_value_info("ACC_IN", I64, ["b", 1])],
                          [helper.make_tensor_value_info("OUTPUT", I64, ["b", 1]),
                           helper.make_tensor_value_info("ACC_OUT", I64, ["b", 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    d = repo / name
    (d / "1").mkdir(parents=True)
    onnx.save(m, str(d / "1" / "model.onnx"))
    (d / "config.pbtxt").write_text(
        'name: "%s"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        'sequence_batching { %s state [{ input_name: "ACC_IN" output_name: "ACC_OUT" data_type: TYPE_INT64 '
        'dims: [1] initial_state { name: "zeros" data_type: TYPE_INT64 dims: [1] zero_data: true } }] }\n'
        'input [{ name: "INPUT" data_type: TYPE_INT32 dims: [1] }]\n'
        'output [{ name: "OUTPUT" data_type: TYPE_INT64 dims: [1] }]\n'
        "instance_group [{ kind: KIND_CPU count: %d }]\n" % (name, seq_block, instances))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("seq_repo")
    write_model(repo, "seq_direct", "", ALL)
    # Triton's simple_sequence: START and READY only (any correlation ID, strings too)
    write_model(repo, "seq_plain", "direct { }", {"START": I32, "READY": I32})
    # other flag types: fp32 START, bool END
    write_model(repo, "seq_types", "", {"START": F32, "END": BOOL, "READY": I32})
    # Oldest: a batch waits (long) for the preferred size 4, one request per sequence in it; each
    # sequence stays on one of the two instances (new ones go to the one holding fewer)
    write_model(repo, "seq_oldest",
                "oldest { max_candidate_sequences: 8 preferred_batch_size: [4] max_queue_delay_microseconds: 20000000 }",
                ALL, instances=2)
    # one slot (max_batch_size 1, one instance) and a short idle time
    write_model(repo, "seq_idle", "max_sequence_idle_microseconds: 300000", ALL, max_batch=1)
    # one slot that an idle sequence keeps for a minute
    write_model(repo, "seq_hold", "max_sequence_idle_microseconds: 60000000", ALL, max_batch=1)
    write_accumulator(repo, "seq_acc", "")
    write_accumulator(repo, "seq_acc_oldest",
                      "oldest { max_candidate_sequences: 8 preferred_batch_size: [4] "
                      "max_queue_delay_microseconds: 20000000 }", instances=2)
    yield from lib.served(str(repo))


@pytest.fixture(scope="module")
def gc(server):
    yield from lib.grpc_client(server)


@pytest.fixture(scope="module")
def hc(server):
    c = httpclient.InferenceServerClient(url="127.0.0.1:%d" % server.http_port)
    yield c
    c.close()


VALUES = [11, 7, 5, 3, 2, 0, 1]


def expected(value, start, end, ready=1):
    return ready * (value + 100 * start + 10000 * end)


def _inputs(mod, value, batch=1):
    x = mod.InferInput("INPUT", [batch, 1], "INT32")
    x.set_data_from_numpy(np.full((batch, 1), value, np.int32))
    return [x]


def _check(res, value, start, end, corr=None):
    assert int(res.as_numpy("OUTPUT")[0][0]) == expected(value, start, end), (value, start, end)
    if corr is not None:
        assert int(res.as_numpy("CORR")[0][0]) == corr


def _flags(i, n):
    return i == 0, i == n - 1


def test_metadata_lists_only_the_client_inputs(gc):
    md = gc.get_model_metadata("seq_direct")
    assert [i.name for i in md.inputs] == ["INPUT"]
    cfg = gc.get_model_config("seq_direct").config
    assert [c.name for c in cfg.sequence_batching.control_input] == ["START", "END", "READY", "CORRID"]


def test_two_interleaved_sequences_grpc_sync(gc):
    """As simple_grpc_sequence_sync_infer_client.py: two sequences, one request each in turn."""
    ids = (1000, 1001)
    sums = {ids[0]: 0, ids[1]: 0}
    for i, v in enumerate(VALUES):
        start, end = _flags(i, len(VALUES))
        for sid, val in ((ids[0], v), (ids[1], -v)):
            res = gc.infer("seq_direct", _inputs(grpcclient, val), sequence_id=sid, sequence_start=start,
                           sequence_end=end)
            _check(res, val, start, end, corr=sid)
            sums[sid] += int(res.as_numpy("OUTPUT")[0][0])
    # accumulated as the client sees it: the values, plus the START and END markers
    assert sums[1000] == sum(VALUES) + 100 + 10000
    assert sums[1001] == -sum(VALUES) + 100 + 10000


def test_two_interleaved_sequences_http_sync(hc):
    """As simple_http_sequence_sync_infer_client.py, with one numeric and one string ID."""
    ids = (2000, "2001")
    for i, v in enumerate(VALUES):
        start, end = _flags(i, len(VALUES))
        for sid, val in ((ids[0], v), (ids[1], -v)):
            res = hc.infer("seq_direct", _inputs(httpclient, val), sequence_id=sid, sequence_start=start,
                           sequence_end=end)
            _check(res, val, start, end, corr=int(sid))


def test_interleaved_sequences_grpc_stream(server):
    """As simple_grpc_sequence_stream_infer_client.py: three sequences on one stream, one of them with a
    UUID (string) ID on a model without CORRID; answers matched to requests by request id."""
    got = queue.Queue()
    c = grpcclient.InferenceServerClient(url=server.grpc_url)
    try:
        c.start_stream(callback=lambda result, error: got.put((result, error)))
        seqs = [("seq_direct", 3000, 1), ("seq_direct", 3001, -1), ("seq_plain", str(uuid.uuid4()), 1)]
        sent = {}
        for i, v in enumerate(VALUES):
            start, end = _flags(i, len(VALUES))
            for model, sid, sign in seqs:
                rid = "%s_%d" % (sid, i)
                direct = model == "seq_direct"  # seq_plain has no END nor CORRID control
                sent[rid] = (sign * v, start, end and direct, sid if direct else None)
                c.async_stream_infer(model, _inputs(grpcclient, sign * v), request_id=rid, sequence_id=sid,
                                     sequence_start=start, sequence_end=end)
        order = {}
        for _ in range(len(sent)):
            res, err = got.get(timeout=WAIT_S)
            assert err is None, err
            rid = res.get_response().id
            val, start, end, corr = sent.pop(rid)
            _check(res, val, start, end, corr)
            sid, i = rid.rsplit("_", 1)
            order.setdefault(sid, []).append(int(i))
        assert not sent
        # a sequence's answers come in its request order (one request of a sequence at a time)
        for sid, idx in order.items():
            assert idx == sorted(idx), (sid, idx)
    finally:
        c.stop_stream()
        c.close()


def test_flag_types(gc):
    """fp32_false_true and bool_false_true controls: START as 0.0/1.0, END as false/true."""
    for i, v in enumerate([4, 5, 6]):
        start, end = _flags(i, 3)
        res = gc.infer("seq_types", _inputs(grpcclient, v), sequence_id=77, sequence_start=start, sequence_end=end)
        _check(res, v, start, end)


def _refused(call, status, msg):
    with pytest.raises(InferenceServerException) as ei:
        call()
    assert lib.status_name(ei.value) == status or str(ei.value.status()) == status, ei.value
    assert msg in lib.error_message(ei.value), lib.error_message(ei.value)


def test_refusals_grpc_and_http(gc, hc):
    for c, mod, status in ((gc, grpcclient, "INVALID_ARGUMENT"), (hc, httpclient, "400")):
        _refused(lambda: c.infer("seq_direct", _inputs(mod, 1)), status,
                 "inference request to model 'seq_direct' must specify a non-zero or non-empty correlation ID")
        _refused(lambda: c.infer("seq_direct", _inputs(mod, 1), sequence_id=424242), status,
                 "inference request for sequence 424242 to model 'seq_direct' must specify the START flag on the "
                 "first request of the sequence")
        _refused(lambda: c.infer("seq_direct", _inputs(mod, 1, batch=2), sequence_id=5, sequence_start=True), status,
                 "must specify batch-size 1 due to requirements of sequence batcher")
        # a string ID that is no number cannot feed a UINT64 CORRID
        _refused(lambda: c.infer("seq_direct", _inputs(mod, 1), sequence_id="abc-1", sequence_start=True), status,
                 "correlation ID 'abc-1' is a string, but the model's CORRID control takes a number (UINT64)")
    # after END the ID is unknown again
    gc.infer("seq_direct", _inputs(grpcclient, 1), sequence_id=4242, sequence_start=True, sequence_end=True)
    _refused(lambda: gc.infer("seq_direct", _inputs(grpcclient, 1), sequence_id=4242), "INVALID_ARGUMENT",
             "inference request for sequence 4242 to model 'seq_direct' must specify the START flag")


def test_oldest_batches_one_request_per_sequence(gc, server):
    """Eight sequences at once on the Oldest model, four on each instance: each step's eight requests (one
    per sequence) run as two batches of the preferred size 4; ModelStatistics counts the executions."""
    before = lib.model_stats(gc, "seq_oldest")
    n_seq, steps = 8, 3
    barrier = threading.Barrier(n_seq)

    def run(k):
        out = []
        c = grpcclient.InferenceServerClient(url=server.grpc_url)
        try:
            for i in range(steps):
                start, end = _flags(i, steps)
                barrier.wait(WAIT_S)
                res = c.infer("seq_oldest", _inputs(grpcclient, 10 * k + i), sequence_id=5000 + k,
                              sequence_start=start, sequence_end=end, client_timeout=WAIT_S)
                _check(res, 10 * k + i, start, end, corr=5000 + k)
                out.append(int(res.as_numpy("OUTPUT")[0][0]))
        finally:
            c.close()
        return out

    with cf.ThreadPoolExecutor(n_seq) as ex:
        results = list(ex.map(run, range(n_seq)))
    for k, out in enumerate(results):
        assert out == [expected(10 * k + i, i == 0, i == steps - 1) for i in range(steps)]
    after = lib.model_stats(gc, "seq_oldest")
    assert after.inference_count - before.inference_count == n_seq * steps
    assert after.execution_count - before.execution_count == 2 * steps  # each step a batch of 4 per instance


def test_idle_sequence_frees_its_slot(gc, server):
    """seq_idle has one slot: a second sequence waits for it until the first, never ended, has been idle
    for max_sequence_idle_microseconds (0.3 s); then the first's ID is unknown."""
    res = gc.infer("seq_idle", _inputs(grpcclient, 1), sequence_id=61, sequence_start=True)
    _check(res, 1, True, False, corr=61)
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(lambda: gc.infer("seq_idle", _inputs(grpcclient, 2), sequence_id=62, sequence_start=True,
                                         sequence_end=True, client_timeout=WAIT_S))
        res = fut.result(WAIT_S)
    _check(res, 2, True, True, corr=62)
    assert time.monotonic() - t0 >= 0.2  # it waited for the idle time (0.3 s from the first's answer)
    _refused(lambda: gc.infer("seq_idle", _inputs(grpcclient, 3), sequence_id=61), "INVALID_ARGUMENT",
             "inference request for sequence 61 to model 'seq_idle' must specify the START flag")


def test_implicit_state_accumulates(gc, hc, server):
    """Implicit state: two interleaved sequences (numeric and string IDs) over gRPC, HTTP and a stream;
    each answer is the running sum of its own sequence, a START starts again from zero, and the state
    tensors are not the client's (metadata, requests, answers)."""
    md = gc.get_model_metadata("seq_acc")
    assert [i.name for i in md.inputs] == ["INPUT"] and [o.name for o in md.outputs] == ["OUTPUT"]
    for c, mod, ids in ((gc, grpcclient, (7000, "7001")), (hc, httpclient, ("7002", 7003))):
        sums = {ids[0]: 0, ids[1]: 0}
        for i, v in enumerate(VALUES):
            start, end = _flags(i, len(VALUES))
            for sid, val in ((ids[0], v), (ids[1], -2 * v)):
                res = c.infer("seq_acc", _inputs(mod, val), sequence_id=sid, sequence_start=start, sequence_end=end)
                sums[sid] += val
                assert int(res.as_numpy("OUTPUT")[0][0]) == sums[sid], (sid, i)
                assert res.as_numpy("ACC_OUT") is None
        # the same ID again: a new sequence from zero
        res = c.infer("seq_acc", _inputs(mod, 5), sequence_id=ids[0], sequence_start=True, sequence_end=True)
        assert int(res.as_numpy("OUTPUT")[0][0]) == 5
    _refused(lambda: gc.infer("seq_acc", _inputs(grpcclient, 1), sequence_id=1, sequence_start=True,
                              outputs=[grpcclient.InferRequestedOutput("ACC_OUT")]), "INVALID_ARGUMENT",
             "unknown requested output 'ACC_OUT'")

    got = queue.Queue()
    s = grpcclient.InferenceServerClient(url=server.grpc_url)
    try:
        s.start_stream(callback=lambda result, error: got.put((result, error)))
        for i, v in enumerate(VALUES):
            start, end = _flags(i, len(VALUES))
            for sid, sign in ((7100, 1), (7101, -1)):
                s.async_stream_infer("seq_acc", _inputs(grpcclient, sign * v), request_id="%d_%d" % (sid, i),
                                     sequence_id=sid, sequence_start=start, sequence_end=end)
        answers = {}
        for _ in range(2 * len(VALUES)):
            res, err = got.get(timeout=WAIT_S)
            assert err is None, err
            sid, i = res.get_response().id.split("_")
            answers[(int(sid), int(i))] = int(res.as_numpy("OUTPUT")[0][0])
        for sid, sign in ((7100, 1), (7101, -1)):
            assert [answers[(sid, i)] for i in range(len(VALUES))] == list(sign * np.cumsum(VALUES))
    finally:
        s.stop_stream()
        s.close()


def test_implicit_state_in_oldest_batches(gc, server):
    """Eight sequences batched four by four by Oldest on two instances: each row's state goes back to its
    own sequence."""
    before = lib.model_stats(gc, "seq_acc_oldest")
    n_seq, steps = 8, 5
    barrier = threading.Barrier(n_seq)

    def run(k):
        c = grpcclient.InferenceServerClient(url=server.grpc_url)
        out = []
        try:
            for i in range(steps):
                start, end = _flags(i, steps)
                barrier.wait(WAIT_S)
                res = c.infer("seq_acc_oldest", _inputs(grpcclient, (k + 1) * (i + 1)), sequence_id=7200 + k,
                              sequence_start=start, sequence_end=end, client_timeout=WAIT_S)
                out.append(int(res.as_numpy("OUTPUT")[0][0]))
        finally:
            c.close()
        return out

    with cf.ThreadPoolExecutor(n_seq) as ex:
        results = list(ex.map(run, range(n_seq)))
    for k, out in enumerate(results):
        assert out == list(np.cumsum([(k + 1) * (i + 1) for i in range(steps)])), (k, out)
    after = lib.model_stats(gc, "seq_acc_oldest")
    assert after.execution_count - before.execution_count == 2 * steps


def test_backlogged_request_leaves_at_its_deadline(gc, server):
    """seq_hold's one slot is kept by a sequence that stays idle: a second sequence's request waits in the
    backlog; when its deadline passes the server answers it DEADLINE_EXCEEDED and drops it (the backlog's
    sweep), instead of running it once the slot frees a minute later."""
    gc.infer("seq_hold", _inputs(grpcclient, 1), sequence_id=81, sequence_start=True)
    before = lib.model_stats(gc, "seq_hold")
    _refused(lambda: gc.infer("seq_hold", _inputs(grpcclient, 2), sequence_id=82, sequence_start=True,
                              client_timeout=0.3), "DEADLINE_EXCEEDED", "")
    deadline = time.monotonic() + WAIT_S
    while lib.model_stats(gc, "seq_hold").inference_stats.fail.count == before.inference_stats.fail.count:
        assert time.monotonic() < deadline, "the backlogged request was never dropped"
        time.sleep(0.05)
    # its sequence was forgotten with it; the slot's own sequence goes on
    _refused(lambda: gc.infer("seq_hold", _inputs(grpcclient, 3), sequence_id=82), "INVALID_ARGUMENT",
             "inference request for sequence 82 to model 'seq_hold' must specify the START flag")
    res = gc.infer("seq_hold", _inputs(grpcclient, 4), sequence_id=81, sequence_end=True)
    _check(res, 4, False, True, corr=81)
    after = lib.model_stats(gc, "seq_hold")
    assert after.execution_count - before.execution_count == 1  # 82's request never ran
