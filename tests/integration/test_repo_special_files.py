"""Special files in the model repository (issue 31, item 6): a FIFO as a model's external data, as its
model.onnx, as its config.pbtxt or as its warmup data used to block that model's load in open(2) until
someone wrote to it, and with it the startup and every gRPC call (ServerLive, inference, the index). Now
the repository's files are opened without blocking and anything but a regular file is refused at once:
the model fails alone, its load error names the file and its kind ("... is a FIFO, not a regular
file"), the other models serve, and ServerLive answers within a second throughout."""

import os
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from test_confine import WARMUP, W, add, write_model

FIFO_MSG = "is a FIFO, not a regular file"


def fifo_external(repo, name):
    """A model whose external weights file w.bin is a FIFO with no writer."""
    d = add(repo, name)
    write_model(os.path.join(d, "1", "model.onnx"), "w.bin")
    os.remove(os.path.join(d, "1", "w.bin"))
    os.mkfifo(os.path.join(d, "1", "w.bin"))
    return d


@pytest.fixture
def repo(tmp_path):
    r = str(tmp_path / "repo")
    write_model(os.path.join(add(r, "good"), "1", "model.onnx"))
    fifo_external(r, "fifo_external")
    d = add(r, "fifo_model")  # model.onnx itself
    os.mkfifo(os.path.join(d, "1", "model.onnx"))
    d = add(r, "fifo_config")  # config.pbtxt
    write_model(os.path.join(d, "1", "model.onnx"))
    os.remove(os.path.join(d, "config.pbtxt"))
    os.mkfifo(os.path.join(d, "config.pbtxt"))
    d = add(r, "fifo_warmup", WARMUP)  # warmup/x.bin
    write_model(os.path.join(d, "1", "model.onnx"))
    os.makedirs(os.path.join(d, "warmup"))
    os.mkfifo(os.path.join(d, "warmup", "x.bin"))
    d = add(r, "dev_model")  # a link to a device, inside the model directory's bounds or not: never read
    os.symlink("/dev/zero", os.path.join(d, "1", "model.onnx"))
    return r


BAD = {  # model -> the file its reason names
    "fifo_external": "fifo_external/1/w.bin",
    "fifo_model": "fifo_model/1/model.onnx",
    "fifo_config": "fifo_config/config.pbtxt",
    "fifo_warmup": "fifo_warmup/warmup/x.bin",
}


def infer_good(c):
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
    inp = grpcclient.InferInput("INPUT0", [2, 16], "FP32")
    inp.set_data_from_numpy(x)
    np.testing.assert_allclose(c.infer("good", [inp], client_timeout=10).as_numpy("OUTPUT0"), x + W, rtol=0, atol=0)


def assert_live_fast(c):
    t0 = time.monotonic()
    assert c.is_server_live(client_timeout=1.0) is True
    assert time.monotonic() - t0 < 1.0


class LiveProbe:
    """ServerLive in a loop on its own channel while the test runs; records the slowest answer and any failure."""

    def __init__(self, url):
        self.c = grpcclient.InferenceServerClient(url=url)
        self.stop, self.worst, self.errors, self.calls = threading.Event(), 0.0, [], 0
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                if self.c.is_server_live(client_timeout=1.0) is not True:
                    self.errors.append("not live")
            except InferenceServerException as e:
                self.errors.append(str(e))
            self.worst = max(self.worst, time.monotonic() - t0)
            self.calls += 1
            time.sleep(0.02)

    def finish(self):
        self.stop.set()
        self.t.join(5)
        self.c.close()
        assert not self.errors, self.errors
        assert self.calls > 0 and self.worst < 1.0, (self.calls, self.worst)


def test_fifos_in_the_repository_fail_alone_at_startup(start_server, repo):
    srv = start_server([], repo=repo)
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    probe = LiveProbe(srv.grpc_url)
    try:
        assert_live_fast(c)
        index = {m["name"]: m for m in c.get_model_repository_index(as_json=True)["models"]}
        assert sorted(index) == sorted(list(BAD) + ["good", "dev_model"])
        for name, path in BAD.items():
            assert c.is_model_ready(name) is False, name
            reason = index[name].get("reason", "")
            assert path in reason and FIFO_MSG in reason, (name, reason)
        assert c.is_model_ready("dev_model") is False
        assert "is a character device, not a regular file" in index["dev_model"].get("reason", ""), index["dev_model"]
        assert c.is_model_ready("good") is True, index["good"]
        infer_good(c)
        assert_live_fast(c)
    finally:
        probe.finish()
        c.close()
    srv.stop()
    srv.assert_clean_exit()


def test_loading_a_model_with_a_fifo_answers_at_once(start_server, tmp_path):
    """Model control: a model given a FIFO for weights after startup; its load answers the error at once
    (it used to hang, and the server with it), and the server keeps serving the good one."""
    r = str(tmp_path / "repo")
    write_model(os.path.join(add(r, "good"), "1", "model.onnx"))
    srv = start_server(["--model-control-mode", "explicit", "--load-model", "good"], repo=r, strict=True)
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    probe = LiveProbe(srv.grpc_url)
    try:
        fifo_external(r, "late")
        t0 = time.monotonic()
        with pytest.raises(InferenceServerException) as ei:
            c.load_model("late", client_timeout=20)
        assert time.monotonic() - t0 < 5.0
        assert "late/1/w.bin" in str(ei.value) and FIFO_MSG in str(ei.value), str(ei.value)
        assert c.is_model_ready("late") is False
        index = {m["name"]: m for m in c.get_model_repository_index(as_json=True)["models"]}
        assert FIFO_MSG in index["late"].get("reason", ""), index["late"]
        assert_live_fast(c)
        infer_good(c)
    finally:
        probe.finish()
        c.close()
    srv.stop()
    srv.assert_clean_exit()
