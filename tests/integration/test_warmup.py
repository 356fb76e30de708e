"""Triton's model_warmup: entries run on every instance before the model is ready (zero, random and file
data; `count` repeats), are not counted as inference, and a warmup that cannot run fails the model's load
with the entry and input named; the other models keep serving. Also: decoupled models are refused."""

import os
import re

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferd_testlib as lib

g = lib.gen_models
IO_IN, IO_OUT = [g._io("V_X", "FP32", [8])], [g._out("V_Y", "FP32", [4])]


def _entry(name, batch, data, key="V_X", dtype="TYPE_FP32", dims="8", count=None):
    return ('{\n  name: "%s"\n  batch_size: %d\n%s  inputs {\n    key: "%s"\n    value: {\n      data_type: %s\n'
            '      dims: [ %s ]\n      %s\n    }\n  }\n}' % (name, batch, "  count: %d\n" % count if count else "",
                                                            key, dtype, dims, data))


def _warmup(*entries):
    return "model_warmup [\n%s\n]" % ",\n".join(entries)


def _two_cpu():
    return "instance_group [\n  {\n    count: 2\n    kind: KIND_CPU\n  }\n]"


def _dyn_matmul(name):
    """Y = X @ W with X [N, -1]: the config cannot know K, so a wrong K is caught only when it runs."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("MatMul", ["D_X", "D_W"], ["D_Y"], name="mm")]
    return g._model(name, nodes, [g._vi("D_X", TensorProto.FLOAT, [None, "K"])],
                    [g._vi("D_Y", TensorProto.FLOAT, [None, 4])], [g._init("D_W", g._w(rng, 8, 4))])


@pytest.fixture(scope="module")
def warm_repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("warm_repo"))
    repo = g.Repo(d)
    lin = g._small_linear
    repo.add("warm_ok", 8, IO_IN, IO_OUT, {1: lin("warm_ok", 1)}, config_extra=_warmup(
        _entry("zeros", 4, "zero_data: true"),
        _entry("random", 1, "random_data: true", count=3),
        _entry("file", 2, 'input_data_file: "x.bin"')) + "\n" + _two_cpu())
    os.makedirs(os.path.join(d, "warm_ok", "warmup"))
    np.arange(8, dtype=np.float32).tofile(os.path.join(d, "warm_ok", "warmup", "x.bin"))  # one sample
    bad = {
        "warm_no_input": (_entry("nokey", 1, "zero_data: true", key="NOPE"), ["model_warmup 'nokey'", "'NOPE'"]),
        "warm_dtype": (_entry("dt", 1, "zero_data: true", dtype="TYPE_INT32"), ["model_warmup 'dt'", "TYPE_INT32"]),
        "warm_batch": (_entry("big", 99, "zero_data: true"), ["model_warmup 'big'", "batch_size 99", "8"]),
        "warm_dims": (_entry("dims", 1, "zero_data: true", dims="7"), ["model_warmup 'dims'", "dim 0 is 7"]),
        "warm_nofile": (_entry("nf", 1, 'input_data_file: "absent.bin"'), ["model_warmup 'nf'", "absent.bin"]),
        "warm_escape": (_entry("esc", 1, 'input_data_file: "../config.pbtxt"'), ["model_warmup 'esc'", "inside"]),
        # issue 15: three million runs kept the server unready and deaf to SIGTERM
        "warm_count": (_entry("many", 1, "zero_data: true", count=3000000),
                       ["model_warmup 'many'", "count 3000000 exceeds 1000"]),
    }
    for name, (entry, _) in bad.items():
        repo.add(name, 8, IO_IN, IO_OUT, {1: lin(name, 2)}, config_extra=_warmup(entry), expect="UNAVAILABLE")
    # sizes checked before anything is allocated or run (fuzz_rest): dims whose product wraps, and a warmup
    # over the server's budget (--model-warmup-max-mib 1 below, per load): 10 runs x 8 rows x 16 KiB = 1.25 MiB
    dyn_in, dyn_out = [g._io("D_X", "FP32", [-1])], [g._out("D_Y", "FP32", [4])]
    sized = {
        "warm_wrap": (_entry("huge", 1, "zero_data: true", key="D_X", dims="2305843009213693952"),
                      ["entry 'huge'", "9223372036854775808 bytes of input", "over the 1048576"]),
        "warm_budget": (_entry("budget", 8, "zero_data: true", key="D_X", dims="4096", count=10),
                        ["1310720 bytes of input (the most, entry 'budget': 10 run(s) on 1 instance(s) of 131072 "
                         "bytes each), over the 1048576 one load may feed", "--model-warmup-max-mib"]),
    }
    for name, (entry, _) in sized.items():
        repo.add(name, 8, dyn_in, dyn_out, {1: _dyn_matmul(name)}, config_extra=_warmup(entry), expect="UNAVAILABLE")
    # runs, and fails in the engine: the entry was really executed
    repo.add("warm_exec", 8, [g._io("D_X", "FP32", [-1])], [g._out("D_Y", "FP32", [4])], {1: _dyn_matmul("warm_exec")},
             config_extra=_warmup(_entry("k7", 1, "zero_data: true", key="D_X", dims="7")), expect="UNAVAILABLE")
    repo.add("decoupled", 8, IO_IN, IO_OUT, {1: lin("decoupled", 3)},
             config_extra="model_transaction_policy {\n  decoupled: true\n}", expect="UNAVAILABLE")
    reasons = {n: words for n, (_, words) in list(bad.items()) + list(sized.items())}
    reasons["warm_exec"] = ["model_warmup 'k7'", "instance 0"]
    reasons["decoupled"] = ["decoupled", "not supported"]
    return d, repo.specs, reasons


@pytest.fixture(scope="module")
def warm_server(warm_repo):
    yield from lib.served(warm_repo[0], ["--strict-readiness", "false", "--model-warmup-max-mib", "1"])


def test_warmup_runs_on_every_instance_before_ready(warm_server, warm_repo, rng):
    import tritonclient.grpc as grpcclient
    log = warm_server.stderr_text()
    # (1 + 3 + 1) executions per instance, two instances
    assert re.search(r"model 'warm_ok' version 1: model_warmup ran 10 execution\(s\)", log), log[-3000:]
    with grpcclient.InferenceServerClient(url=warm_server.grpc_url) as c:
        assert c.is_model_ready("warm_ok")
        st = c.get_inference_statistics("warm_ok").model_stats[0]
        assert st.inference_count == 0 and st.execution_count == 0, "warmup must not count as inference"
        feeds = lib.random_inputs(warm_repo[1]["warm_ok"], rng, 3)
        _, got = lib.infer(c, "warm_ok", feeds)
        lib.assert_close(got["V_Y"], lib.Oracle(warm_repo[0], warm_repo[1]).run("warm_ok", feeds)["V_Y"], 1e-5)
        assert c.get_inference_statistics("warm_ok").model_stats[0].inference_count == 3


def test_failed_warmups_fail_the_load_and_say_why(warm_server, warm_repo):
    import tritonclient.grpc as grpcclient
    reasons = warm_repo[2]
    with grpcclient.InferenceServerClient(url=warm_server.grpc_url) as c:
        index = {m.name: m for m in c.get_model_repository_index().models}
        for name, words in reasons.items():
            assert not c.is_model_ready(name), name
            m = index[name]
            assert m.state == "UNAVAILABLE" and all(w in m.reason for w in words), (name, m.reason, words)
        assert c.is_model_ready("warm_ok")  # the failures do not touch the others


def test_sigterm_interrupts_a_long_warmup(tmp_path):
    """A stop signal while the repository loads (here a warmup of minutes) ends the process at once,
    exit status 0, instead of waiting for the load to finish (issue 15)."""
    import signal
    import time
    repo = g.Repo(str(tmp_path))
    rng = np.random.default_rng(3)
    # four 64x2048x2048 products a run, 1000 runs: minutes of work on a few cores
    nodes = [helper.make_node("MatMul", ["S_X", "S_W"], ["S_T1"], name="mm1"),
             helper.make_node("MatMul", ["S_T1", "S_W"], ["S_T2"], name="mm2"),
             helper.make_node("MatMul", ["S_T2", "S_W"], ["S_T3"], name="mm3"),
             helper.make_node("MatMul", ["S_T3", "S_W"], ["S_Y"], name="mm4")]
    m = g._model("slow_warm", nodes, [g._vi("S_X", TensorProto.FLOAT, [None, 2048])],
                 [g._vi("S_Y", TensorProto.FLOAT, [None, 2048])], [g._init("S_W", g._w(rng, 2048, 2048))])
    repo.add("slow_warm", 64, [g._io("S_X", "FP32", [2048])], [g._out("S_Y", "FP32", [2048])], {1: m},
             config_extra=_warmup(_entry("long", 64, "zero_data: true", key="S_X", dims="2048", count=1000)))
    srv = lib.ServerProcess(str(tmp_path))
    srv.proc = None
    import subprocess
    import threading
    srv.proc = subprocess.Popen(srv.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, errors="replace")
    reader = threading.Thread(target=srv._read, daemon=True)
    reader.start()
    try:
        srv.await_stderr(lambda ls: any("running model_warmup" in l for l in ls), timeout=60)
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        rc = srv.proc.wait(timeout=20)
        took = time.monotonic() - t0
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
    reader.join(timeout=10)
    assert rc == 0, srv.stderr_tail()
    assert not any("model_warmup ran" in l for l in srv.lines), "the warmup finished before the signal took effect"
    assert any("stop signal while loading" in l for l in srv.lines), srv.stderr_tail()
    assert took < 10, "exit took %.1f s after SIGTERM" % took
