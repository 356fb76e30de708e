"""Requests of different sequence lengths behind the dynamic batcher (config parameters
pad_to_longest and pad_max_ratio), through the real server with tritonclient (gRPC).

The model is a small transformer layer made here with the onnx package: token embedding (Gather of
input_ids), one masked self-attention (the attention mask, padded with 0, gives padded keys a
-1e9 bias, so they get exactly zero weight) and masked mean pooling. Its outputs carry the
sequence dim in one place (hidden [B, L, H]), in two (probs [B, L, L]) and not at all (pooled
[B, H]). Every answer is checked against onnxruntime run on that request alone, so padding is
shown not to change a real row; ModelStatistics shows what ran together.

Queue order is fixed by sending requests one at a time and awaiting the pending gauge; batches
form on a preferred size reached or on a scan stop (the queue delays are long and never the
reason a batch goes, except where a test says so).
"""

import concurrent.futures as cf
import os
import time

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper, numpy_helper
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

V, H = 50, 16
WAIT_S = 30
SEQ_OUTPUTS = ("hidden", "pooled", "probs")


def make_model(path, seed=0):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.normal(0, 0.5, size=s).astype(np.float32)  # noqa: E731
    inits = [numpy_helper.from_array(f(V, H), "emb"), numpy_helper.from_array(f(H, H), "wq"),
             numpy_helper.from_array(f(H, H), "wk"), numpy_helper.from_array(f(H, H), "wv"),
             numpy_helper.from_array(np.array([1.0 / np.sqrt(H)], np.float32), "scale"),
             numpy_helper.from_array(np.array([1.0], np.float32), "one"),
             numpy_helper.from_array(np.array([-1e9], np.float32), "neg"),
             numpy_helper.from_array(np.array([1], np.int64), "ax1"),
             numpy_helper.from_array(np.array([2], np.int64), "ax2")]
    n = helper.make_node
    nodes = [
        n("Gather", ["emb", "input_ids"], ["x"]),
        n("MatMul", ["x", "wq"], ["q"]), n("MatMul", ["x", "wk"], ["k"]), n("MatMul", ["x", "wv"], ["v"]),
        n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["s0"]), n("Mul", ["s0", "scale"], ["s1"]),
        n("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        n("Sub", ["one", "m"], ["notm"]), n("Mul", ["notm", "neg"], ["bias"]),
        n("Unsqueeze", ["bias", "ax1"], ["bias3"]), n("Add", ["s1", "bias3"], ["s2"]),
        n("Softmax", ["s2"], ["probs"], axis=-1),
        n("MatMul", ["probs", "v"], ["hidden"]),
        n("Unsqueeze", ["m", "ax2"], ["m3"]), n("Mul", ["hidden", "m3"], ["hm"]),
        n("ReduceSum", ["hm", "ax1"], ["num"], keepdims=0),
        n("ReduceSum", ["m", "ax1"], ["den"], keepdims=1),
        n("Div", ["num", "den"], ["pooled"]),
    ]
    g = helper.make_graph(
        nodes, "seq_attn",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", H]),
         helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", H]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", "seq", "seq"])],
        inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


PAD = 'parameters { key: "pad_to_longest" value { string_value: "%s" } }\n'
RATIO = 'parameters { key: "pad_max_ratio" value { string_value: "%s" } }\n'
CPU = "instance_group [{ count: 1 kind: KIND_CPU }]\n"

# name -> config.pbtxt (inputs and outputs auto-completed from the ONNX file, as Triton does)
CONFIGS = {
    # padding, unbounded: 4 rows (the preferred size) go together whatever their lengths
    "seq_pad": "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 5000000 }\n"
               + CPU + PAD % "input_ids:0, attention_mask:0",
    # padding bounded to longest <= 2 x shortest
    "seq_pad_ratio": "max_batch_size: 8\n"
                     "dynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 2000000 }\n"
                     + CPU + PAD % "input_ids,attention_mask" + RATIO % "2",
    # the same model without the switch: lengths never mix
    "seq_nopad": "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 300000 }\n"
                 + CPU,
    # misuses fail the load, naming what is wrong
    "seq_bad_input": "max_batch_size: 8\ndynamic_batching {}\n" + CPU + PAD % "input_ids:0,token_type_ids:0",
    "seq_bad_value": "max_batch_size: 8\ndynamic_batching {}\n" + CPU + PAD % "input_ids:pad",
    "seq_ragged": "max_batch_size: 8\ndynamic_batching {}\n" + CPU
                  + 'input [{ name: "input_ids" data_type: TYPE_INT64 dims: [-1] allow_ragged_batch: true },'
                    ' { name: "attention_mask" data_type: TYPE_INT64 dims: [-1] }]\n',
}
LOAD_ERRORS = {
    "seq_bad_input": "pad_to_longest: 'token_type_ids' is not an input of the model",
    "seq_bad_value": "pad value 'pad' of input 'input_ids' is not a INT64 value",
    "seq_ragged": "input 'input_ids': allow_ragged_batch is not supported",
}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("seqpad_repo"))
    onnx_path = os.path.join(d, "model.onnx")
    make_model(onnx_path)
    data = open(onnx_path, "rb").read()
    os.remove(onnx_path)
    for name, cfg in CONFIGS.items():
        os.makedirs(os.path.join(d, name, "1"))
        with open(os.path.join(d, name, "1", "model.onnx"), "wb") as f:
            f.write(data)
        with open(os.path.join(d, name, "config.pbtxt"), "w") as f:
            f.write('name: "%s"\n' % name + cfg)
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    gen = lib.served(d)
    srv = next(gen)
    client = grpcclient.InferenceServerClient(url=srv.grpc_url)
    yield type("Env", (), {"srv": srv, "client": client, "sess": sess, "repo": d})
    client.close()
    next(gen, None)


# --- helpers

def feeds(rng, length, rows=1):
    ids = rng.integers(1, V, size=(rows, length)).astype(np.int64)
    return {"input_ids": ids, "attention_mask": np.ones((rows, length), np.int64)}


def oracle(env, f):
    return dict(zip(SEQ_OUTPUTS, env.sess.run(list(SEQ_OUTPUTS), f)))


def stats(client, model):
    ms = [m for m in client.get_inference_statistics(model, "1").model_stats if m.name == model]
    assert len(ms) == 1
    return ms[0]


def table(st):
    return {b.batch_size: b.compute_infer.count for b in st.batch_stats if b.compute_infer.count}


def settle(client, model, requests):
    """Statistics once `requests` successes are accounted (they may lag the last answer a moment)."""
    end = time.monotonic() + WAIT_S
    while True:
        st = stats(client, model)
        if st.inference_stats.success.count >= requests or time.monotonic() > end:
            return st
        time.sleep(0.005)


def pending(env, model):
    return lib.metric_sum(lib.scrape_metrics(env.srv), "nv_inference_pending_request_count", model=model, version="1")


def await_pending(env, model, n):
    end = time.monotonic() + WAIT_S
    while pending(env, model) != n:
        assert time.monotonic() < end, "pending requests of %s never reached %d" % (model, n)
        time.sleep(0.002)


def send_in_order(env, model, requests):
    """async_infer each request once the previous one is queued (pending gauge); returns the answers
    ({output: array} or the exception) in request order."""
    futs = []
    for i, f in enumerate(requests):
        fut = cf.Future()
        futs.append(fut)

        def done(result, error, fut=fut):
            fut.set_result(error if error else {o: result.as_numpy(o) for o in SEQ_OUTPUTS})
        env.client.async_infer(model, lib.triton_inputs(f), done)
        if i + 1 < len(requests):
            await_pending(env, model, i + 1)
    return [fut.result(WAIT_S) for fut in futs]


def check_answers(env, requests, answers):
    for f, got in zip(requests, answers):
        assert not isinstance(got, Exception), got
        want = oracle(env, f)
        rows, length = f["input_ids"].shape
        assert got["hidden"].shape == (rows, length, H)   # cropped back to the request's own length
        assert got["probs"].shape == (rows, length, length)
        assert got["pooled"].shape == (rows, H)
        for o in SEQ_OUTPUTS:
            lib.assert_close(got[o], want[o], 1e-5, what="%s (L=%d, rows=%d)" % (o, length, rows))


# --- tests

def test_lengths_3_5_8_share_one_batch(env):
    """Lengths 3, 5 (two rows) and 8 in flight at once: one execution of 4 rows padded to 8, every
    answer equal to onnxruntime on the request alone and cropped to its own length."""
    rng = np.random.default_rng(1)
    reqs = [feeds(rng, 3), feeds(rng, 5, rows=2), feeds(rng, 8)]
    answers = send_in_order(env, "seq_pad", reqs)
    check_answers(env, reqs, answers)
    st = settle(env.client, "seq_pad", 3)
    assert st.execution_count == 1 < 3 == st.inference_stats.success.count, st
    assert st.inference_count == 4
    assert table(st) == {4: 1}


def test_without_the_switch_lengths_do_not_mix(env):
    rng = np.random.default_rng(2)
    reqs = [feeds(rng, 3), feeds(rng, 5), feeds(rng, 8), feeds(rng, 5)]
    with cf.ThreadPoolExecutor(4) as ex:
        futs = [ex.submit(lib.infer, env.client, "seq_nopad", f) for f in reqs]
        answers = [fu.result(WAIT_S)[1] for fu in futs]
    check_answers(env, reqs, answers)
    st = settle(env.client, "seq_nopad", 4)
    # each length runs on its own (the two of length 5 may or may not meet: 3 or 4 executions)
    assert st.execution_count in (3, 4), st
    assert set(table(st)) <= {1, 2}
    assert st.execution_count == 4 or table(st) == {1: 2, 2: 1}


def test_pad_max_ratio_bounds_the_padding(env):
    """Ratio 2: 3, 5 and 4 share a batch (5 <= 2 x 3); 8 would make it 8 > 2 x 3, so the scan stops
    there and the three go at once, padded to 5; 8 runs alone after its queue delay."""
    rng = np.random.default_rng(3)
    reqs = [feeds(rng, 3), feeds(rng, 5), feeds(rng, 4), feeds(rng, 8)]
    answers = send_in_order(env, "seq_pad_ratio", reqs)
    check_answers(env, reqs, answers)
    st = settle(env.client, "seq_pad_ratio", 4)
    assert table(st) == {3: 1, 1: 1}, st
    assert st.execution_count == 2


def test_padded_inputs_must_agree_on_length(env):
    f = {"input_ids": np.ones((1, 5), np.int64), "attention_mask": np.ones((1, 4), np.int64)}
    with pytest.raises(InferenceServerException) as ei:
        lib.infer(env.client, "seq_pad", f)
    assert lib.status_name(ei.value) == "INVALID_ARGUMENT"
    assert "input 'attention_mask': sequence length 4 differs from input 'input_ids''s 5" in \
        lib.error_message(ei.value)


def test_many_lengths_concurrently(env):
    """Random lengths from many threads: whatever batches form, every answer is right."""
    rng = np.random.default_rng(4)
    reqs = [feeds(rng, int(rng.integers(1, 24)), rows=int(rng.integers(1, 3))) for _ in range(48)]
    before = stats(env.client, "seq_pad")
    with cf.ThreadPoolExecutor(12) as ex:
        futs = [ex.submit(lib.infer, env.client, "seq_pad", f) for f in reqs]
        answers = [fu.result(WAIT_S)[1] for fu in futs]
    check_answers(env, reqs, answers)
    st = settle(env.client, "seq_pad", before.inference_stats.success.count + len(reqs))
    assert st.inference_count - before.inference_count == sum(f["input_ids"].shape[0] for f in reqs)


@pytest.mark.parametrize("model", sorted(LOAD_ERRORS))
def test_misconfigured_models_fail_to_load(env, model):
    idx = {m.name: m for m in env.client.get_model_repository_index().models}
    assert idx[model].state == "UNAVAILABLE", idx[model]
    assert LOAD_ERRORS[model] in idx[model].reason
    assert not env.client.is_model_ready(model)


def test_shapes_whose_bytes_overflow_are_refused(env):
    """[1, 2^62] of INT64 is 2^65 bytes: the byte size used to wrap to 0, so empty raw contents matched
    and the request was queued; [8, 2^61] overflowed the element count (UB). Found by
    tests/fuzz/fuzz_infer (its seeds keep both). Both are INVALID_ARGUMENT now, and serving goes on."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    with grpc.insecure_channel(env.srv.grpc_url) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        for shape in ([1, 2**62], [8, 2**61]):
            req = service_pb2.ModelInferRequest(model_name="seq_nopad")
            for name in ("input_ids", "attention_mask"):
                req.inputs.add(name=name, datatype="INT64", shape=shape)
                req.raw_input_contents.append(b"")
            with pytest.raises(grpc.RpcError) as ei:
                stub.ModelInfer(req, timeout=30)
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value
            assert "input 'input_ids': shape [%d,%d] of INT64 is too large" % tuple(shape) in ei.value.details()
    f = feeds(np.random.default_rng(7), 5)
    check_answers(env, [f], [lib.infer(env.client, "seq_nopad", f)[1]])


def test_empty_input_without_contents_beside_typed_contents(env):
    """An empty input ([1, 0], no contents: allowed) before another input's typed contents: the
    conversion dereferenced the empty one's missing contents and the server died (SIGSEGV). Found by
    tests/fuzz/fuzz_infer (seed regress-empty-without-contents). Now the request gets its own error."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    with grpc.insecure_channel(env.srv.grpc_url) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        req = service_pb2.ModelInferRequest(model_name="seq_nopad")
        req.inputs.add(name="input_ids", datatype="INT64", shape=[1, 0])
        req.inputs.add(name="attention_mask", datatype="INT64", shape=[1, 3]).contents.uint_contents.extend([1, 1, 1])
        with pytest.raises(grpc.RpcError) as ei:
            stub.ModelInfer(req, timeout=30)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value
        assert ei.value.details() == "input 'attention_mask': got 0 int64_contents values, expected 3"
    f = feeds(np.random.default_rng(8), 4)
    check_answers(env, [f], [lib.infer(env.client, "seq_nopad", f)[1]])
