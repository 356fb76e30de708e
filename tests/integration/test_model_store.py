"""Issue 31, item 9: symbolic links the operator placed in the repository are followed within bounds.
A Hugging Face cache links snapshots/<rev>/<file> into blobs/<sha>; a Kubernetes volume or a shared model
store is linked in the same way. Links may lead anywhere inside the model repository and into the folders
--model-store-allow names; nowhere else (a link to /etc/passwd as external data stays refused, flag or
not). Names a network request gives (a load request's config override: its default_model_filename, its
warmup input_data_file) are still confined to the model's own directory."""

import os

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from test_confine import W, WARMUP, add, config, write_model


def hf_cache(root, name, rev="0123abc"):
    """A Hugging Face cache entry: models--<name>/blobs/<sha> holds the bytes, snapshots/<rev>/ links each
    file name into blobs (relative links, as huggingface_hub makes them). Returns the snapshot folder."""
    base = os.path.join(root, "models--" + name)
    blobs, snap = os.path.join(base, "blobs"), os.path.join(base, "snapshots", rev)
    os.makedirs(blobs)
    os.makedirs(snap)
    staging = os.path.join(base, "staging")
    write_model(os.path.join(staging, "model.onnx"), "model.onnx_data")
    for i, f in enumerate(["model.onnx", "model.onnx_data"]):
        sha = "%064x" % (0xabc0 + i)
        os.rename(os.path.join(staging, f), os.path.join(blobs, sha))
        os.symlink(os.path.join("..", "..", "blobs", sha), os.path.join(snap, f))
    os.rmdir(staging)
    return snap


@pytest.fixture
def layout(tmp_path):
    repo, cache, elsewhere = tmp_path / "repo", tmp_path / "hfcache", tmp_path / "elsewhere"
    for d in (repo, cache, elsewhere):
        d.mkdir()
    snap = hf_cache(str(cache), "org--add")

    # the version folder is the snapshot (model file and external data both resolve into blobs)
    d = add(str(repo), "hf_snapshot")
    os.rmdir(os.path.join(d, "1"))
    os.symlink(snap, os.path.join(d, "1"))

    # each file linked on its own, the snapshot's links linked again (two hops into blobs)
    d = add(str(repo), "hf_files")
    for f in ("model.onnx", "model.onnx_data"):
        os.symlink(os.path.join(snap, f), os.path.join(d, "1", f))

    # a shared store inside the repository itself: followed without any flag
    store = os.path.join(str(repo), ".store")  # hidden: not a model
    write_model(os.path.join(store, "add.onnx"))
    d = add(str(repo), "repo_store")
    os.symlink("../../.store/add.onnx", os.path.join(d, "1", "model.onnx"))

    # warmup data in the repository's store, from the operator's config.pbtxt: followed
    np.ones(16, np.float32).tofile(os.path.join(store, "ones.bin"))
    d = add(str(repo), "warmup_store", WARMUP)
    write_model(os.path.join(d, "1", "model.onnx"))
    os.makedirs(os.path.join(d, "warmup"))
    os.symlink("../../.store/ones.bin", os.path.join(d, "warmup", "x.bin"))

    # external data linking to /etc/passwd: refused whatever the flags say
    d = add(str(repo), "ext_passwd")
    write_model(os.path.join(d, "1", "model.onnx"), "w.bin")
    os.remove(os.path.join(d, "1", "w.bin"))
    os.symlink("/etc/passwd", os.path.join(d, "1", "w.bin"))

    # a link into a folder no flag names
    write_model(str(elsewhere / "add.onnx"))
    d = add(str(repo), "elsewhere")
    os.symlink(str(elsewhere / "add.onnx"), os.path.join(d, "1", "model.onnx"))
    return str(repo), str(cache)


HF = ["hf_snapshot", "hf_files"]
ALWAYS = ["repo_store", "warmup_store"]


def _infer_ok(c, name):
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
    inp = grpcclient.InferInput("INPUT0", [2, 16], "FP32")
    inp.set_data_from_numpy(x)
    np.testing.assert_allclose(c.infer(name, [inp]).as_numpy("OUTPUT0"), x + W, rtol=0, atol=0)


def _index(c):
    return {m["name"]: m for m in c.get_model_repository_index(as_json=True)["models"]}


def test_hf_cache_with_the_flag(start_server, layout):
    repo, cache = layout
    srv = start_server(["--model-store-allow", cache], repo=repo)
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        index = _index(c)
        for name in HF + ALWAYS:
            assert c.is_model_ready(name), (name, index[name])
            _infer_ok(c, name)
        assert not c.is_model_ready("ext_passwd")
        reason = index["ext_passwd"].get("reason", "")
        assert "escapes the model repository" in reason and "resolves to /etc/passwd" in reason, reason
        assert not c.is_model_ready("elsewhere")
        assert "--model-store-allow" in index["elsewhere"].get("reason", "")
    srv.stop()
    srv.assert_clean_exit()


def test_hf_cache_without_the_flag_names_it(start_server, layout):
    repo, _ = layout
    srv = start_server([], repo=repo)
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        index = _index(c)
        for name in HF:
            assert not c.is_model_ready(name), name
            reason = index[name].get("reason", "")
            assert "escapes the model repository" in reason and "--model-store-allow" in reason, (name, reason)
        for name in ALWAYS:  # inside the repository: no flag needed
            assert c.is_model_ready(name), (name, index[name])
            _infer_ok(c, name)
    srv.stop()
    srv.assert_clean_exit()


def test_names_from_a_load_request_stay_in_the_model_directory(start_server, layout):
    """Explicit mode, with the flag: a config override naming the model file or warmup data gets the strict
    bound (the file must resolve inside the model's directory); the same model loaded with an override that
    names neither still follows the operator's links."""
    repo, cache = layout
    srv = start_server(["--model-store-allow", cache, "--model-control-mode", "explicit"], repo=repo)
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        # the override names the operator's link: refused, it leaves the model directory
        over = config("hf_files", 'default_model_filename: "model.onnx"\n')
        with pytest.raises(InferenceServerException) as ei:
            c.load_model("hf_files", config=over)
        assert "escapes the model directory" in str(ei.value), ei.value
        assert not c.is_model_ready("hf_files")
        # no file named by the request: the default name, the operator's link, followed
        c.load_model("hf_files", config=config("hf_files"))
        _infer_ok(c, "hf_files")
        # warmup data named by an override, through the link the operator placed: refused
        with pytest.raises(InferenceServerException) as ei:
            c.load_model("warmup_store", config=config("warmup_store", WARMUP))
        assert "input_data_file" in str(ei.value) and "escapes the model directory" in str(ei.value), ei.value
        # the same warmup from the operator's config.pbtxt: followed
        c.load_model("warmup_store")
        _infer_ok(c, "warmup_store")
    srv.stop()
    srv.assert_clean_exit()


@pytest.mark.parametrize("bad", ["/nonexistent/folder", "", "FILE"])
def test_bad_flag_values_refused_at_startup(layout, bad, tmp_path):
    import inferd_testlib as lib
    if bad == "FILE":
        bad = str(tmp_path / "a_file")
        open(bad, "w").close()
    text = lib.start_fails(layout[0], ["--model-store-allow", bad])
    assert "--model-store-allow" in text and "is not a folder" in text, text
