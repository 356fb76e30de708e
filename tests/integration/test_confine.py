"""Files a model names stay inside the model repository once symbolic links are resolved (issue 15): an
external-data file, a warmup input_data_file or the model file itself that is a link to a file outside
the repository fails that model's load naming the escape, instead of serving the target's bytes (a link
to /etc/passwd used to load, and inference returned 'root:x:0:0:...' as weights). Names are looked up
where they were (external data in the model file's folder, warmup data in warmup/, the model file in the
model's directory); links the operator placed there may lead anywhere inside the repository, or into a
--model-store-allow folder (issue 31, item 9: test_model_store.py). Links that stay inside keep working,
and the other models serve."""

import os

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper, numpy_helper

W = np.arange(16, dtype=np.float32) * 0.5  # 64 bytes of weights


def write_model(path, weights_location=None):
    """[N,16] FP32 -> INPUT0 + W, W stored as external data at weights_location (else inline)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    w = numpy_helper.from_array(W, "W")
    g = helper.make_graph([helper.make_node("Add", ["INPUT0", "W"], ["OUTPUT0"])], "add",
                          [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N", 16])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    if weights_location:
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=weights_location, size_threshold=0)
    else:
        onnx.save(m, path)


def config(name, extra=""):
    return ('name: "%s"\nmax_batch_size: 4\n'
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n%s' % (name, extra))


def add(repo, name, extra=""):
    d = os.path.join(repo, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(config(name, extra))
    return d


WARMUP = """model_warmup [ { name: "w" batch_size: 1 count: 1
  inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 16 ] input_data_file: "x.bin" } } } ]"""


@pytest.fixture
def repo(tmp_path):
    r = str(tmp_path / "repo")
    outside = tmp_path / "outside"
    outside.mkdir()
    # a secret outside every model directory, exactly as large as the weights (only the escape can fail it)
    secret = outside / "secret.bin"
    secret.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n" * 2)
    assert secret.stat().st_size == W.nbytes
    write_model(str(outside / "model.onnx"))

    d = add(r, "ext_link_out")  # external weights: a link to the secret
    write_model(os.path.join(d, "1", "model.onnx"), "w.bin")
    os.remove(os.path.join(d, "1", "w.bin"))
    os.symlink(str(secret), os.path.join(d, "1", "w.bin"))

    d = add(r, "ext_link_passwd")  # the case: /etc/passwd itself
    write_model(os.path.join(d, "1", "model.onnx"), "w.bin")
    os.remove(os.path.join(d, "1", "w.bin"))
    os.symlink("/etc/passwd", os.path.join(d, "1", "w.bin"))

    d = add(r, "ext_link_in")  # a link that stays beside the model file (external data's bound): fine
    write_model(os.path.join(d, "1", "model.onnx"), "w.bin")
    os.makedirs(os.path.join(d, "1", "data"))
    os.rename(os.path.join(d, "1", "w.bin"), os.path.join(d, "1", "data", "weights.bin"))
    os.symlink("data/weights.bin", os.path.join(d, "1", "w.bin"))

    d = add(r, "model_link_out")  # the model file itself links out of the model directory
    os.symlink(str(outside / "model.onnx"), os.path.join(d, "1", "model.onnx"))

    d = add(r, "model_link_in")  # ... or to a file beside it: fine
    write_model(os.path.join(d, "shared.onnx"))
    os.symlink("../shared.onnx", os.path.join(d, "1", "model.onnx"))

    d = add(r, "warmup_link_out", WARMUP)  # warmup data linking out
    write_model(os.path.join(d, "1", "model.onnx"))
    os.makedirs(os.path.join(d, "warmup"))
    os.symlink(str(secret), os.path.join(d, "warmup", "x.bin"))

    d = add(r, "warmup_link_in", WARMUP)  # warmup data linking to a file in warmup/: fine
    write_model(os.path.join(d, "1", "model.onnx"))
    os.makedirs(os.path.join(d, "warmup"))
    np.ones(16, np.float32).tofile(os.path.join(d, "warmup", "ones.bin"))
    os.symlink("ones.bin", os.path.join(d, "warmup", "x.bin"))
    return r


ESCAPES = ["ext_link_out", "ext_link_passwd", "model_link_out", "warmup_link_out"]
FINE = ["ext_link_in", "model_link_in", "warmup_link_in"]


def test_links_out_of_the_model_directory_fail_alone(start_server, repo):
    srv = start_server([], repo=repo)
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    try:
        index = {m["name"]: m for m in c.get_model_repository_index(as_json=True)["models"]}
        assert sorted(index) == sorted(ESCAPES + FINE)
        for name in ESCAPES:
            assert c.is_model_ready(name) is False, name
            reason = index[name].get("reason", "")
            assert "escapes the model repository" in reason, (name, reason)
        assert "resolves to /etc/passwd" in index["ext_link_passwd"]["reason"]
        for name in FINE:
            assert c.is_model_ready(name) is True, (name, index[name])
            x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
            inp = grpcclient.InferInput("INPUT0", [2, 16], "FP32")
            inp.set_data_from_numpy(x)
            got = c.infer(name, [inp]).as_numpy("OUTPUT0")
            np.testing.assert_allclose(got, x + W, rtol=0, atol=0)
    finally:
        c.close()
    srv.stop()
    srv.assert_clean_exit()
