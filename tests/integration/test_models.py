"""Checks the generated model repository itself, without a server: every model is valid ONNX that
onnxruntime runs, every config.pbtxt parses with Triton's own model_config proto and agrees with
its ONNX file, the op-coverage models cover every op, and the failing models fail for the reason
they are meant to."""

import os

import numpy as np
import onnx
import pytest
from google.protobuf import text_format

import inferd_testlib as lib

TRITON_DT = {"FP32": "TYPE_FP32", "FP16": "TYPE_FP16", "INT64": "TYPE_INT64", "INT32": "TYPE_INT32"}
ONNX_WIRE = {onnx.TensorProto.FLOAT: "FP32", onnx.TensorProto.FLOAT16: "FP16", onnx.TensorProto.INT64: "INT64"}


def _load_config(repo_dir, name, pb_config):
    with open(os.path.join(repo_dir, name, "config.pbtxt")) as f:
        return text_format.Parse(f.read(), pb_config.ModelConfig())


def _onnx_io(path):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}

    def dims(vi):
        return [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]
    ins = {i.name: (i.type.tensor_type.elem_type, dims(i)) for i in m.graph.input if i.name not in inits}
    outs = {o.name: (o.type.tensor_type.elem_type, dims(o)) for o in m.graph.output}
    return m, ins, outs


def _model_paths(repo_dir, spec):
    return {v: os.path.join(repo_dir, spec["name"], str(v), spec["filename"]) for v in spec["versions"]}


def test_every_required_op_is_covered(repo_dir, specs):
    ops = set()
    for name, spec in specs.items():
        if spec["expect"] != "READY":
            continue
        for p in _model_paths(repo_dir, spec).values():
            ops |= {n.op_type for n in onnx.load(p, load_external_data=False).graph.node}
    missing = sorted(set(lib.gen_models.REQUIRED_OPS) - ops)
    assert not missing, "ops not covered by any loadable model: %s" % missing
    assert "Bernoulli" not in ops, "Bernoulli must only appear in the unsupported_op models"


def test_batched_and_unbatched_models_exist(specs):
    ready = [s for s in specs.values() if s["expect"] == "READY" and s["has_config"]]
    assert any(s["max_batch_size"] == 0 for s in ready)
    assert any(s["max_batch_size"] > 0 for s in ready)


def test_configs_parse_with_triton_proto_and_match_onnx(repo_dir, specs, pb):
    for name, spec in specs.items():
        if not spec["has_config"] or name in ("bad_config", "bad_dtype"):
            continue
        cfg = _load_config(repo_dir, name, pb.config)
        assert cfg.name == name
        assert cfg.max_batch_size == spec["max_batch_size"]
        for v, path in _model_paths(repo_dir, spec).items():
            if not os.path.exists(path):
                assert name == "missing_file"
                continue
            _, ins, outs = _onnx_io(path)
            batch = [-1] if cfg.max_batch_size > 0 else []
            assert sorted(ins) == sorted(i.name for i in cfg.input), name
            assert sorted(outs) == sorted(o.name for o in cfg.output), name
            for t in list(cfg.input) + list(cfg.output):
                et, d = (ins.get(t.name) or outs[t.name])
                assert pb.config.DataType.Name(t.data_type) == TRITON_DT[ONNX_WIRE[et]], (name, t.name)
                assert batch + list(t.dims) == d, (name, t.name, list(t.dims), d)


def test_bad_config_does_not_parse(repo_dir, pb):
    with pytest.raises(text_format.ParseError):
        _load_config(repo_dir, "bad_config", pb.config)


def test_bad_dtype_config_disagrees_with_onnx(repo_dir, pb):
    cfg = _load_config(repo_dir, "bad_dtype", pb.config)
    _, ins, _ = _onnx_io(os.path.join(repo_dir, "bad_dtype", "1", "model.onnx"))
    assert pb.config.DataType.Name(cfg.input[0].data_type) == "TYPE_INT32"
    assert ins[cfg.input[0].name][0] == onnx.TensorProto.FLOAT


def test_missing_file_has_empty_version_dir(repo_dir):
    d = os.path.join(repo_dir, "missing_file", "1")
    assert os.path.isdir(d) and os.listdir(d) == []


def test_unsupported_op_has_named_bernoulli(repo_dir):
    m = onnx.load(os.path.join(repo_dir, "unsupported_op", "1", "model.onnx"))
    assert [(n.op_type, n.name) for n in m.graph.node] == [("Bernoulli", "bernoulli_1")]


def test_autocomplete_has_no_config(repo_dir):
    assert not os.path.exists(os.path.join(repo_dir, "autocomplete", "config.pbtxt"))
    _, ins, outs = _onnx_io(os.path.join(repo_dir, "autocomplete", "1", "model.onnx"))
    assert ins == {"AC_X": (onnx.TensorProto.FLOAT, [-1, 20])}
    assert outs == {"AC_Y": (onnx.TensorProto.FLOAT, [-1, 3])}


def test_external_data_layout(repo_dir, oracle, specs, rng):
    d = os.path.join(repo_dir, "external_data", "1")
    assert sorted(os.listdir(d)) == ["model.onnx", "weights.bin"]
    m = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
    assert m.graph.initializer and all(
        i.data_location == onnx.TensorProto.EXTERNAL and not i.raw_data for i in m.graph.initializer)
    # 512x256 + 512 + 32x512 + 32 floats, all in the one file.
    assert os.path.getsize(os.path.join(d, "weights.bin")) >= (512 * 256 + 512 + 32 * 512 + 32) * 4
    feeds = lib.random_inputs(specs["external_data"], rng, 3)
    y = oracle.run("external_data", feeds)["EXT_Y"]
    assert y.shape == (3, 32) and np.all(np.isfinite(y))


def test_versions_differ(repo_dir, specs, oracle, rng):
    feeds = lib.random_inputs(specs["versioned"], rng, 2)
    ys = [oracle.run("versioned", feeds, v)["V_Y"] for v in (1, 2, 3)]
    for a in range(3):
        for b in range(a + 1, 3):
            assert np.max(np.abs(ys[a] - ys[b])) > 1e-2, "versions %d and %d compute the same" % (a + 1, b + 1)
    assert specs["versioned"]["ready_versions"] == [2, 3]
    assert specs["versioned_specific"]["ready_versions"] == [1]


@pytest.mark.parametrize("name", ["mlp", "ops_gemm", "ops_elementwise", "ops_matmul", "ops_shape", "ops_norm",
                                  "ops_gelu", "ops_conv", "fp16_io", "external_data", "autocomplete", "versioned",
                                  "versioned_specific", "default_filename"])
def test_oracle_runs_every_loadable_model(name, specs, oracle, rng):
    spec = specs[name]
    for batch in ([1, spec["max_batch_size"]] if spec["max_batch_size"] else [None]):
        feeds = lib.random_inputs(spec, rng, batch or 1)
        out = oracle.run(name, feeds)
        assert sorted(out) == sorted(o["name"] for o in spec["outputs"])
        for o in spec["outputs"]:
            want = ([batch] if batch else []) + o["dims"]
            assert list(out[o["name"]].shape) == want, (name, o["name"])
            assert out[o["name"]].dtype == lib.NP_OF_WIRE[o["datatype"]]
            assert np.all(np.isfinite(out[o["name"]].astype(np.float64)))


def test_oracle_matches_numpy_reference_for_mlp(repo_dir, oracle, specs, rng):
    """Pins the oracle itself: onnxruntime agrees with a float64 numpy evaluation of the MLP."""
    m = onnx.load(os.path.join(repo_dir, "mlp", "1", "model.onnx"))
    w = {i.name: onnx.numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    x = lib.random_inputs(specs["mlp"], rng, 16)["INPUT0"]
    ref = np.maximum(x.astype(np.float64) @ w["W1"].T + w["B1"], 0) @ w["W2"].T + w["B2"]
    lib.assert_close(oracle.run("mlp", {"INPUT0": x})["OUTPUT0"], ref.astype(np.float32), 1e-5, "mlp vs numpy")


def test_example_set_is_small(tmp_path):
    specs = lib.gen_models.generate(str(tmp_path), "example")
    assert "mlp" in specs and len(specs) <= 2
    assert sorted(os.listdir(tmp_path)) == sorted(specs)
