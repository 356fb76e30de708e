"""Inference results against onnxruntime on fresh random inputs: every loadable model at several
batch sizes through tritonclient (raw_input_contents), the same through raw grpcio with typed
contents using Triton's own generated protos, requested-output subsets, echoed ids/names/versions,
and version selection."""

import numpy as np
import pytest

import inferd_testlib as lib

MODELS = ["mlp", "ops_gemm", "ops_elementwise", "ops_matmul", "ops_shape", "ops_norm", "ops_gelu", "ops_conv",
          "ops_vision_misc", "ops_shape_fold", "fp16_io",
          "external_data", "autocomplete", "versioned", "versioned_specific", "default_filename"]


def _batches(spec):
    mbs = spec["max_batch_size"]
    return sorted({1, 2, mbs}) if mbs > 0 else [None]


@pytest.mark.parametrize("name", MODELS)
def test_infer_matches_onnxruntime(client, specs, oracle, rng, name):
    spec = specs[name]
    for batch in _batches(spec):
        feeds = lib.random_inputs(spec, rng, batch or 1)
        res, got = lib.infer(client, name, feeds)
        want = oracle.run(name, feeds)
        lib.check_outputs(got, want, spec, what="%s batch %s" % (name, batch))
        resp = res.get_response()
        assert resp.model_name == name
        assert resp.model_version == str(spec["default_version"])
        for o in resp.outputs:
            assert list(o.shape) == list(want[o.name].shape), (name, o.name)
            assert o.datatype == lib.np_to_wire(want[o.name].dtype), (name, o.name)


def test_shape_fold_every_batch_size(client, specs, oracle, rng):
    # the folded shape values (Reshape target, Resize sizes, ConstantOfShape, Range) follow the batch,
    # back and forth
    spec = specs["ops_shape_fold"]
    for batch in (3, 1, 8, 3, 5):
        feeds = lib.random_inputs(spec, rng, batch)
        _, got = lib.infer(client, "ops_shape_fold", feeds)
        lib.check_outputs(got, oracle.run("ops_shape_fold", feeds), spec, what="ops_shape_fold batch %d" % batch)


def test_mlp_every_batch_size(client, specs, oracle, rng):
    spec = specs["mlp"]
    for batch in range(1, spec["max_batch_size"] + 1):
        feeds = lib.random_inputs(spec, rng, batch)
        _, got = lib.infer(client, "mlp", feeds)
        lib.check_outputs(got, oracle.run("mlp", feeds), spec, what="mlp batch %d" % batch)


def test_special_values_pass_through(client, specs, oracle):
    """Exact values where the oracle is exact: Relu of +-0 and large magnitudes, int64 casts of
    negative values (truncation toward zero), fp16 rounding of values between fp16 neighbours."""
    spec = specs["ops_shape"]
    x = np.array([0.0, -0.0, 1e-8, -1e-8, 0.14999, -0.15001, 0.35, -0.95, 3.999, -3.999, 2.5, -2.5,
                  1.0 + 2 ** -12, 1.0 + 3 * 2 ** -12, 65504.0 / 20000, -1e-3, 0.05, -0.05, 0.0999999, 0.1,
                  0.2, -0.2, 0.3, -0.3], dtype=np.float32).reshape(1, 2, 3, 4)
    _, got = lib.infer(client, "ops_shape", {"SHP_X": x})
    lib.check_outputs(got, oracle.run("ops_shape", {"SHP_X": x}), spec, what="ops_shape special values")


def _typed_request(pb, model, feeds, version="", outputs=(), request_id=""):
    req = pb.service.ModelInferRequest(model_name=model, model_version=version, id=request_id)
    field = {"FP32": "fp32_contents", "INT64": "int64_contents", "INT32": "int_contents", "FP64": "fp64_contents"}
    for name, arr in feeds.items():
        t = req.inputs.add(name=name, datatype=lib.np_to_wire(arr.dtype), shape=list(arr.shape))
        getattr(t.contents, field[t.datatype]).extend(arr.ravel().tolist())
    for o in outputs:
        req.outputs.add(name=o)
    return req


def _raw_request(pb, model, feeds, version="", outputs=(), request_id=""):
    req = pb.service.ModelInferRequest(model_name=model, model_version=version, id=request_id)
    for name, arr in feeds.items():
        req.inputs.add(name=name, datatype=lib.np_to_wire(arr.dtype), shape=list(arr.shape))
        req.raw_input_contents.append(np.ascontiguousarray(arr).tobytes())
    for o in outputs:
        req.outputs.add(name=o)
    return req


@pytest.mark.parametrize("name", ["mlp", "ops_elementwise", "ops_matmul", "ops_shape", "ops_norm", "ops_gemm"])
def test_typed_contents_raw_grpc(stub, pb, specs, oracle, rng, name):
    spec = specs[name]
    for batch in _batches(spec):
        feeds = lib.random_inputs(spec, rng, batch or 1)
        resp = stub.ModelInfer(_typed_request(pb, name, feeds, request_id="typed-%s" % name), timeout=30)
        assert resp.model_name == name and resp.id == "typed-%s" % name
        lib.check_outputs(lib.decode_response_outputs(resp), oracle.run(name, feeds), spec,
                          what="%s typed batch %s" % (name, batch))


@pytest.mark.parametrize("name", ["mlp", "fp16_io", "ops_shape"])
def test_raw_contents_raw_grpc(stub, pb, specs, oracle, rng, name):
    spec = specs[name]
    feeds = lib.random_inputs(spec, rng, 3)
    resp = stub.ModelInfer(_raw_request(pb, name, feeds), timeout=30)
    lib.check_outputs(lib.decode_response_outputs(resp), oracle.run(name, feeds), spec, what=name + " raw")


def test_raw_inputs_anywhere_in_the_message(channel, pb, specs, oracle, rng):
    """The server reads raw_input_contents where they lie in the received message instead of
    unpacking copies (server/core/infer.c, unpack_request). Protobuf lets fields come in any order and
    a message be sent as concatenated parts, so: the tensors before the other fields, between
    them, after them with an unknown field, and a 256 KB message (several HTTP/2 frames, so
    several slices); every answer against onnxruntime."""
    call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                               response_deserializer=pb.service.ModelInferResponse.FromString)
    unknown = bytes([0xb8, 0x06, 0x05])  # field 103, varint 5: kept aside by protobuf, ignored by the server
    for name, batch in (("ops_elementwise", 3), ("mlp", 64), ("mlp", 1)):
        spec = specs[name]
        feeds = lib.random_inputs(spec, rng, batch)
        head = _raw_request(pb, name, feeds, request_id="parts-%s" % name)
        tensors = list(head.raw_input_contents)
        del head.raw_input_contents[:]
        raw = [pb.service.ModelInferRequest(raw_input_contents=[t]).SerializeToString() for t in tensors]
        meta = head.SerializeToString()
        for order in ("tensors first", "tensors around", "tensors last"):
            if order == "tensors first":
                wire = b"".join(raw) + meta
            elif order == "tensors around":
                wire = raw[0] + meta + b"".join(raw[1:])
            else:
                wire = meta + unknown + b"".join(raw)
            resp = call(wire, timeout=30)
            assert resp.id == "parts-%s" % name, order
            lib.check_outputs(lib.decode_response_outputs(resp), oracle.run(name, feeds), spec,
                              what="%s batch %d, %s" % (name, batch, order))


def test_requested_output_subset(client, specs, oracle, rng):
    spec = specs["ops_elementwise"]
    feeds = lib.random_inputs(spec, rng, 3)
    want = oracle.run("ops_elementwise", feeds)
    for subset in (["ELT_DIV"], ["ELT_ERF", "ELT_ADD"], ["ELT_IDENT", "ELT_SIGMOID", "ELT_LEAKY"]):
        _, got = lib.infer(client, "ops_elementwise", feeds, outputs=subset)
        lib.check_outputs(got, want, spec, names=subset, what="subset %s" % subset)


def test_requested_output_subset_raw_grpc(stub, pb, specs, oracle, rng):
    spec = specs["ops_gemm"]
    feeds = lib.random_inputs(spec, rng, 4)
    resp = stub.ModelInfer(_raw_request(pb, "ops_gemm", feeds, outputs=["GEMM_TT", "GEMM_NN"]), timeout=30)
    assert sorted(o.name for o in resp.outputs) == ["GEMM_NN", "GEMM_TT"]
    lib.check_outputs(lib.decode_response_outputs(resp), oracle.run("ops_gemm", feeds), spec,
                      names=["GEMM_NN", "GEMM_TT"], what="ops_gemm subset")


def test_request_id_and_names_echoed(client, specs, oracle, rng):
    feeds = lib.random_inputs(specs["mlp"], rng, 2)
    for rid in ("req-42", "x" * 200, ""):
        res, got = lib.infer(client, "mlp", feeds, request_id=rid)
        r = res.get_response()
        assert r.id == rid
        assert r.model_name == "mlp" and r.model_version == "1"
        lib.check_outputs(got, oracle.run("mlp", feeds), specs["mlp"])


def test_explicit_and_default_versions(client, specs, oracle, rng):
    spec = specs["versioned"]
    feeds = lib.random_inputs(spec, rng, 3)
    for version, expect in (("", 3), ("3", 3), ("2", 2)):
        res, got = lib.infer(client, "versioned", feeds, version=version)
        assert res.get_response().model_version == str(expect), version
        lib.check_outputs(got, oracle.run("versioned", feeds, expect), spec, what="versioned v%r" % version)
        other = 2 if expect == 3 else 3
        assert not np.allclose(got["V_Y"], oracle.run("versioned", feeds, other)["V_Y"], rtol=1e-3, atol=1e-4), \
            "version %r answered with version %d's weights" % (version, other)
    res, got = lib.infer(client, "versioned_specific", feeds)
    assert res.get_response().model_version == "1"
    lib.check_outputs(got, oracle.run("versioned_specific", feeds, 1), specs["versioned_specific"])


def test_same_input_same_output(client, specs, rng):
    """Determinism across calls (and across batch positions): row i of a batch equals a batch-1 call."""
    spec = specs["mlp"]
    feeds = lib.random_inputs(spec, rng, 8)
    _, full = lib.infer(client, "mlp", feeds)
    for i in (0, 3, 7):
        _, one = lib.infer(client, "mlp", {"INPUT0": feeds["INPUT0"][i:i + 1]})
        lib.assert_close(one["OUTPUT0"][0], full["OUTPUT0"][i], 1e-5, "row %d" % i)


def test_request_of_many_small_fields(stub, pb, specs, oracle, rng):
    """A message of thousands of tiny fields (parameters the server ignores) beside a large raw input: the
    request's unpack arena grows past its first block in many small pieces, protobuf-c's scan slabs take blocks
    of their own, and the 256 KB input one more; the answer must be exact all the same, and the server must go
    on answering (a mis-sized or double-freed block would crash it or corrupt the next request)."""
    spec = specs["mlp"]
    for batch, n_params in ((64, 3000), (1, 5000), (2, 0)):
        feeds = lib.random_inputs(spec, rng, batch)
        req = _raw_request(pb, "mlp", feeds, request_id="many-%d" % n_params)
        for i in range(n_params):
            req.parameters["p%d" % i].string_param = "v%d" % i
        resp = stub.ModelInfer(req, timeout=30)
        assert resp.id == "many-%d" % n_params
        lib.check_outputs(lib.decode_response_outputs(resp), oracle.run("mlp", feeds), spec,
                          what="mlp batch %d with %d parameters" % (batch, n_params))
