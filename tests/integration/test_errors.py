"""Every request error gets its exact status code and a message naming what was wrong, and the
same client/channel keeps getting correct answers afterwards."""

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib


@pytest.fixture
def still_works(client, stub, pb, specs, oracle, rng):
    """Call after an error: a correct answer on the same tritonclient and the same raw channel."""
    def check():
        feeds = lib.random_inputs(specs["mlp"], rng, 2)
        want = oracle.run("mlp", feeds)
        _, got = lib.infer(client, "mlp", feeds)
        lib.check_outputs(got, want, specs["mlp"], what="after error (tritonclient)")
        req = pb.service.ModelInferRequest(model_name="mlp")
        req.inputs.add(name="INPUT0", datatype="FP32", shape=[2, 1024])
        req.raw_input_contents.append(feeds["INPUT0"].tobytes())
        resp = stub.ModelInfer(req, timeout=30)
        lib.check_outputs(lib.decode_response_outputs(resp), want, specs["mlp"], what="after error (raw grpc)")
    return check


def _infer_error(client, model, inputs, version="", outputs=None):
    with pytest.raises(InferenceServerException) as ei:
        client.infer(model, inputs, model_version=version,
                     outputs=[grpcclient.InferRequestedOutput(o) for o in outputs] if outputs else None)
    return lib.status_name(ei.value), lib.error_message(ei.value)


def _raw_error(stub, req):
    with pytest.raises(grpc.RpcError) as ei:
        stub.ModelInfer(req, timeout=30)
    return ei.value.code().name, ei.value.details() or ""


def _assert_err(got, code, *substrings):
    status, msg = got
    assert status == code, "status %s (want %s), message %r" % (status, code, msg)
    for s in substrings:
        assert s in msg, "message %r does not contain %r" % (msg, s)


def _mlp_input(rng, shape=(1, 1024), dt="FP32", name="INPUT0"):
    arr = rng.uniform(-1, 1, size=shape).astype(lib.NP_OF_WIRE[dt])
    return lib.triton_inputs({name: arr}, {name: dt})[0]


def test_unknown_model(client, rng, still_works):
    _assert_err(_infer_error(client, "no_such_model_xyz", [_mlp_input(rng)]), "NOT_FOUND", "no_such_model_xyz")
    still_works()


def test_unknown_version(client, rng, still_works):
    _assert_err(_infer_error(client, "mlp", [_mlp_input(rng)], version="977"), "NOT_FOUND", "977")
    still_works()


def test_version_outside_policy(client, specs, rng, still_works):
    feeds = lib.random_inputs(specs["versioned"], rng, 1)
    _assert_err(_infer_error(client, "versioned", lib.triton_inputs(feeds), version="1"), "NOT_FOUND", "1")
    _assert_err(_infer_error(client, "versioned_specific", lib.triton_inputs(feeds), version="2"), "NOT_FOUND")
    still_works()


@pytest.mark.parametrize("name", ["bad_config", "unsupported_op", "unsupported_many", "missing_file", "bad_dtype"])
def test_failed_model_unavailable(client, specs, rng, still_works, name):
    feeds = lib.random_inputs(specs[name], rng, 1)
    _assert_err(_infer_error(client, name, lib.triton_inputs(feeds)), "UNAVAILABLE", name)
    still_works()


def test_missing_input(client, specs, rng, still_works):
    feeds = lib.random_inputs(specs["ops_elementwise"], rng, 1)
    only_a = lib.triton_inputs({"ELT_A": feeds["ELT_A"]})
    _assert_err(_infer_error(client, "ops_elementwise", only_a), "INVALID_ARGUMENT", "ELT_B")
    _assert_err(_infer_error(client, "mlp", []), "INVALID_ARGUMENT", "INPUT0")
    still_works()


def test_extra_input(client, rng, still_works):
    _assert_err(_infer_error(client, "mlp", [_mlp_input(rng), _mlp_input(rng, name="BOGUS_EXTRA")]),
                "INVALID_ARGUMENT", "BOGUS_EXTRA")
    still_works()


def test_misnamed_input(client, rng, still_works):
    _assert_err(_infer_error(client, "mlp", [_mlp_input(rng, name="INPUT_ZERO")]), "INVALID_ARGUMENT", "INPUT_ZERO")
    still_works()


def test_wrong_datatype(client, rng, still_works):
    _assert_err(_infer_error(client, "mlp", [_mlp_input(rng, dt="FP64")]), "INVALID_ARGUMENT", "INPUT0", "FP32")
    _assert_err(_infer_error(client, "mlp", [_mlp_input(rng, dt="INT32")]), "INVALID_ARGUMENT", "INPUT0", "FP32")
    still_works()


def test_wrong_shape(client, rng, still_works):
    for shape in ((1, 1000), (1, 1025), (2, 2, 1024), (1024,)):
        _assert_err(_infer_error(client, "mlp", [_mlp_input(rng, shape=shape)]), "INVALID_ARGUMENT", "INPUT0",
                    "1024")
    still_works()


def test_wrong_shape_unbatched(client, rng, still_works):
    x = rng.uniform(-1, 1, (1, 2, 5, 8)).astype(np.float32)
    _assert_err(_infer_error(client, "ops_norm", lib.triton_inputs({"NORM_X": x})), "INVALID_ARGUMENT", "NORM_X")
    still_works()


def test_raw_size_mismatch(stub, pb, still_works):
    for nbytes in (4000, 4100, 0):
        req = pb.service.ModelInferRequest(model_name="mlp")
        req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1024])
        req.raw_input_contents.append(b"\0" * nbytes)
        _assert_err(_raw_error(stub, req), "INVALID_ARGUMENT", "INPUT0", "4096")
    still_works()


def test_raw_count_mismatch(stub, pb, still_works):
    """Two raw buffers for one input: there is no input for the second buffer."""
    req = pb.service.ModelInferRequest(model_name="mlp")
    req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1024])
    req.raw_input_contents.extend([b"\0" * 4096, b"\0" * 4096])
    _assert_err(_raw_error(stub, req), "INVALID_ARGUMENT")
    still_works()


def test_typed_count_mismatch(stub, pb, still_works):
    req = pb.service.ModelInferRequest(model_name="mlp")
    t = req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1024])
    t.contents.fp32_contents.extend([0.5] * 1000)
    _assert_err(_raw_error(stub, req), "INVALID_ARGUMENT", "INPUT0")
    still_works()


def test_raw_and_typed_mixed(stub, pb, still_works):
    req = pb.service.ModelInferRequest(model_name="mlp")
    t = req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1024])
    t.contents.fp32_contents.extend([0.5] * 1024)
    req.raw_input_contents.append(b"\0" * 4096)
    _assert_err(_raw_error(stub, req), "INVALID_ARGUMENT")
    still_works()


def test_batch_over_max_batch_size(client, rng, still_works):
    _assert_err(_infer_error(client, "mlp", [_mlp_input(rng, shape=(65, 1024))]), "INVALID_ARGUMENT",
                "max_batch_size", "64")
    _assert_err(_infer_error(client, "autocomplete", lib.triton_inputs(
        {"AC_X": rng.uniform(-1, 1, (5, 20)).astype(np.float32)})), "INVALID_ARGUMENT", "max_batch_size", "4")
    still_works()


def test_zero_batch(client, rng, still_works):
    _assert_err(_infer_error(client, "mlp", [_mlp_input(rng, shape=(0, 1024))]), "INVALID_ARGUMENT", "INPUT0")
    still_works()


def test_unknown_requested_output(client, rng, still_works):
    _assert_err(_infer_error(client, "mlp", [_mlp_input(rng)], outputs=["NOPE_OUT"]), "INVALID_ARGUMENT", "NOPE_OUT")
    _assert_err(_infer_error(client, "mlp", [_mlp_input(rng)], outputs=["OUTPUT0", "NOPE_OUT2"]),
                "INVALID_ARGUMENT", "NOPE_OUT2")
    still_works()


def test_malformed_protobuf(channel, still_works):
    for path in ("/inference.GRPCInferenceService/ModelInfer", "/inference.GRPCInferenceService/ModelMetadata",
                 "/inference.GRPCInferenceService/ModelConfig"):
        call = channel.unary_unary(path)  # no serializer: these bytes go out unchanged
        for junk in (b"\xff\xff\xff", b"\x0a\xff\xff\xff\xff\x0f", b"\x2a\x05\x0a"):
            with pytest.raises(grpc.RpcError) as ei:
                call(junk, timeout=10)
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (path, junk, ei.value.code(),
                                                                        ei.value.details())
    still_works()


def test_many_errors_then_success(client, rng, still_works):
    """Error paths must not leak or wedge anything: 200 mixed bad requests, then normal service."""
    for i in range(50):
        _infer_error(client, "mlp", [_mlp_input(rng, shape=(1, 7))])
        _infer_error(client, "no_such_model", [_mlp_input(rng)])
        _infer_error(client, "mlp", [_mlp_input(rng, dt="FP64")])
        _infer_error(client, "unsupported_op", [_mlp_input(rng)])
    still_works()
