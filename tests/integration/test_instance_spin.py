"""parameters { key: "instance_spin_us" }: an instance's threads watch for work for that long before they sleep
(engine/model_run.c wait_spin). What can break is the hand-off itself: a job posted while the thread spins, while it
goes to sleep, or to a thread that stopped spinning, must still run, once, and its answer reach the client. So
many concurrent clients on a dynamically batched model with two spinning CPU instances, every answer checked
against onnxruntime; a bad value fails that model's load alone, saying why."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import inferd_testlib as lib

g = lib.gen_models
IO_IN, IO_OUT = [g._io("V_X", "FP32", [8])], [g._out("V_Y", "FP32", [4])]
CLIENTS, PER_CLIENT = 16, 40


def _spin(v):
    return 'parameters {\n  key: "instance_spin_us"\n  value { string_value: "%s" }\n}' % v


TWO_CPU = "instance_group [\n  {\n    count: 2\n    kind: KIND_CPU\n  }\n]"
BAD = {
    "spin_words": ("lots", "instance_spin_us 'lots' is not a count of microseconds 0-10000"),
    "spin_neg": ("-5", "instance_spin_us '-5' is not a count of microseconds 0-10000"),
    "spin_big": ("20000", "instance_spin_us '20000' is not a count of microseconds 0-10000"),
}


@pytest.fixture(scope="module")
def spin_repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("spin_repo"))
    repo = g.Repo(d)
    lin = g._small_linear
    # a short spin (50 us) so that sleeping and waking are both exercised between requests
    repo.add("spin_on", 8, IO_IN, IO_OUT, {1: lin("spin_on", 1)},
             config_extra="\n".join([TWO_CPU, "dynamic_batching { }", _spin("50")]))
    repo.add("spin_off", 8, IO_IN, IO_OUT, {1: lin("spin_off", 1)},
             config_extra="\n".join([TWO_CPU, "dynamic_batching { }", _spin("0")]))
    for i, (name, (v, _)) in enumerate(BAD.items()):
        repo.add(name, 8, IO_IN, IO_OUT, {1: lin(name, 2 + i)}, config_extra=_spin(v), expect="UNAVAILABLE")
    return d, repo.specs


@pytest.fixture(scope="module")
def spin_server(spin_repo):
    yield from lib.served(spin_repo[0], ["--strict-readiness", "false"])


@pytest.mark.parametrize("model", ["spin_on", "spin_off"])
def test_every_request_answered_once_and_right(spin_server, spin_repo, model):
    import tritonclient.grpc as grpcclient
    oracle = lib.Oracle(spin_repo[0], spin_repo[1])

    def client(k):
        rng = np.random.default_rng(1000 + k)
        bad = 0
        with grpcclient.InferenceServerClient(url=spin_server.grpc_url) as c:
            for _ in range(PER_CLIENT):
                feeds = lib.random_inputs(spin_repo[1][model], rng, 1)
                _, got = lib.infer(c, model, feeds)
                want = oracle.run(model, feeds)["V_Y"]
                bad += not np.allclose(got["V_Y"], want, rtol=1e-5, atol=1e-6)
        return bad

    with ThreadPoolExecutor(CLIENTS) as ex:
        wrong = sum(ex.map(client, range(CLIENTS)))
    assert wrong == 0
    with grpcclient.InferenceServerClient(url=spin_server.grpc_url) as c:
        st = c.get_inference_statistics(model).model_stats[0]
        assert st.inference_count == CLIENTS * PER_CLIENT
        assert st.inference_stats.success.count == CLIENTS * PER_CLIENT
        assert 0 < st.execution_count <= CLIENTS * PER_CLIENT


def test_bad_spin_values_fail_their_model_alone(spin_server):
    import tritonclient.grpc as grpcclient
    with grpcclient.InferenceServerClient(url=spin_server.grpc_url) as c:
        index = {m.name: m for m in c.get_model_repository_index().models}
        for name, (_, reason) in BAD.items():
            assert index[name].state == "UNAVAILABLE" and reason in index[name].reason, (name, index[name].reason)
        assert c.is_model_ready("spin_on") and c.is_model_ready("spin_off")
