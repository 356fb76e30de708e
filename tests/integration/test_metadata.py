"""Model-level metadata: ModelReady for every model and version, ModelMetadata, ModelConfig
(including the autocompleted one and a max_batch_size 0 model), version policies and the
RepositoryIndex's states and reasons."""

import os

import pytest

import inferd_testlib as lib

READY = ["mlp", "ops_gemm", "ops_elementwise", "ops_matmul", "ops_shape", "ops_norm", "ops_gelu", "ops_conv",
         "ops_vision_misc", "ops_shape_fold", "fp16_io",
         "external_data", "autocomplete", "versioned", "versioned_specific", "default_filename"]
FAILED = ["bad_config", "unsupported_op", "unsupported_many", "missing_file", "bad_dtype"]


def test_model_lists_match_generator(specs):
    assert sorted(READY + FAILED) == sorted(specs)
    assert sorted(FAILED) == sorted(n for n, s in specs.items() if s["expect"] == "UNAVAILABLE")


@pytest.mark.parametrize("name", READY)
def test_model_ready(client, specs, name):
    assert client.is_model_ready(name) is True
    for v in specs[name]["versions"]:
        want = v in specs[name]["ready_versions"]
        assert client.is_model_ready(name, str(v)) is want, "%s version %d ready should be %s" % (name, v, want)


@pytest.mark.parametrize("name", FAILED)
def test_failed_model_not_ready(client, name):
    assert client.is_model_ready(name) is False
    assert client.is_model_ready(name, "1") is False
    assert client.is_server_ready() is True  # a bad model does not make the server unready


@pytest.mark.parametrize("name", READY)
def test_model_metadata(client, specs, name):
    spec = specs[name]
    md = client.get_model_metadata(name)
    assert md.name == name
    assert sorted(int(v) for v in md.versions) == spec["ready_versions"]
    assert isinstance(md.platform, str)
    batch = [-1] if spec["max_batch_size"] > 0 else []
    got_in = {t.name: (t.datatype, list(t.shape)) for t in md.inputs}
    got_out = {t.name: (t.datatype, list(t.shape)) for t in md.outputs}
    assert got_in == {i["name"]: (i["datatype"], batch + i["dims"]) for i in spec["inputs"]}
    assert got_out == {o["name"]: (o["datatype"], batch + o["dims"]) for o in spec["outputs"]}


def test_model_metadata_specific_version(client):
    md = client.get_model_metadata("versioned", "2")
    assert md.name == "versioned"
    assert [t.name for t in md.inputs] == ["V_X"]


def test_model_config_mlp(client, pb):
    cfg = client.get_model_config("mlp").config
    assert cfg.name == "mlp"
    assert cfg.max_batch_size == 64
    assert [(i.name, pb.config.DataType.Name(i.data_type), list(i.dims)) for i in cfg.input] == \
        [("INPUT0", "TYPE_FP32", [1024])]
    assert [(o.name, pb.config.DataType.Name(o.data_type), list(o.dims)) for o in cfg.output] == \
        [("OUTPUT0", "TYPE_FP32", [10])]
    assert cfg.HasField("dynamic_batching")


def test_model_config_unbatched(client, pb):
    cfg = client.get_model_config("ops_norm").config
    assert cfg.max_batch_size == 0
    assert [(i.name, list(i.dims)) for i in cfg.input] == [("NORM_X", [2, 5, 8])]


def test_model_config_autocomplete(client, pb):
    cfg = client.get_model_config("autocomplete").config
    assert cfg.name == "autocomplete"
    assert cfg.max_batch_size == 4
    assert [(i.name, pb.config.DataType.Name(i.data_type), list(i.dims)) for i in cfg.input] == \
        [("AC_X", "TYPE_FP32", [20])]
    assert [(o.name, pb.config.DataType.Name(o.data_type), list(o.dims)) for o in cfg.output] == \
        [("AC_Y", "TYPE_FP32", [3])]


def test_model_config_version_policy_and_filename(client):
    cfg = client.get_model_config("versioned").config
    assert cfg.version_policy.WhichOneof("policy_choice") == "latest"
    assert cfg.version_policy.latest.num_versions == 2
    cfg = client.get_model_config("versioned_specific").config
    assert list(cfg.version_policy.specific.versions) == [1]
    assert client.get_model_config("default_filename").config.default_model_filename == "net.onnx"


def test_repository_index(client, specs, repo_dir):
    idx = client.get_model_repository_index()
    by_name = {}
    for m in idx.models:
        by_name.setdefault(m.name, []).append(m)
    assert sorted(by_name) == sorted(os.listdir(repo_dir)), "index names %s" % sorted(by_name)
    for name, entries in by_name.items():
        spec = specs[name]
        for e in entries:
            assert e.state in ("READY", "UNAVAILABLE"), (name, e.version, e.state)
        if spec["expect"] == "READY":
            ready = [e for e in entries if e.state == "READY"]
            assert ready, "%s has no READY entry: %s" % (name, entries)
            for e in ready:
                if e.version:
                    assert int(e.version) in spec["ready_versions"], (name, e.version)
        else:
            assert all(e.state == "UNAVAILABLE" for e in entries), (name, entries)
            assert all(e.reason for e in entries), "%s: UNAVAILABLE without a reason" % name
            if spec["reason"]:
                assert any(spec["reason"] in e.reason for e in entries), (name, [e.reason for e in entries])


def test_repository_index_lists_every_unsupported_node(client):
    reasons = [m.reason for m in client.get_model_repository_index().models if m.name == "unsupported_many"]
    assert reasons, "unsupported_many is not in the index"
    for r in reasons:
        assert "3 unsupported nodes" in r, r
        for frag in ("'lppool_a' (op_type 'GlobalLpPool')", "'bernoulli_b' (op_type 'Bernoulli')",
                     "'custom_c' (op_type 'FancyOp', domain 'com.example')"):
            assert frag in r, (frag, r)
        assert "relu_ok" not in r, r


def test_repository_index_unsupported_op_reason_names_node(client):
    reasons = [m.reason for m in client.get_model_repository_index().models if m.name == "unsupported_op"]
    assert reasons and any("bernoulli_1" in r for r in reasons), reasons
    assert any("Bernoulli" in r for r in reasons), reasons


@pytest.mark.parametrize("name", ["no_such_model", "mlp_typo"])
def test_metadata_unknown_model(client, name):
    from tritonclient.utils import InferenceServerException
    with pytest.raises(InferenceServerException) as ei:
        client.get_model_metadata(name)
    assert lib.status_name(ei.value) == "NOT_FOUND"
    assert name in lib.error_message(ei.value)
    assert client.get_model_metadata("mlp").name == "mlp"
