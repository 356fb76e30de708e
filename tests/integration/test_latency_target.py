"""parameters { key: "latency_target_ms" } (issue 37, batcher/lattarget.h): with a latency target the dynamic
batcher chooses each batch's size and wait from measured compute times and arrival rate instead of
max_queue_delay_microseconds. Through the real server on the CPU: concurrent clients on a model with a target all
get right answers (checked against onnxruntime), and /metrics shows the policy at work: its target, batches it
sent and measured, predicted and measured compute, the arrival rate it sees. A model without a target shows none
of it. Bad values fail their model's load alone, naming the value. No timing is asserted: CI machines are slow
and shared, and the policy's latency is the simulation's to check (tests/unit/batcher/test_lattarget.c)."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import inferd_testlib as lib

g = lib.gen_models
IO_IN, IO_OUT = [g._io("V_X", "FP32", [8])], [g._out("V_Y", "FP32", [4])]
CLIENTS, PER_CLIENT = 16, 30
TWO_CPU = "instance_group [\n  {\n    count: 2\n    kind: KIND_CPU\n  }\n]"


def _target(v):
    return 'parameters {\n  key: "latency_target_ms"\n  value { string_value: "%s" }\n}' % v


BAD = {
    "lt_words": ("soon", "latency_target_ms 'soon' is not a number of milliseconds"),
    "lt_zero": ("0", "latency_target_ms '0' is not a number of milliseconds"),
    "lt_unit": ("5ms", "latency_target_ms '5ms' is not a number of milliseconds"),
}


@pytest.fixture(scope="module")
def lt_repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("lt_repo"))
    repo = g.Repo(d)
    lin = g._small_linear
    repo.add("lt_on", 16, IO_IN, IO_OUT, {1: lin("lt_on", 1)},
             config_extra="\n".join([TWO_CPU, "dynamic_batching { }", _target("20")]))
    # preferred sizes and a fixed delay beside the target: the delay caps the policy's wait
    repo.add("lt_pref", 16, IO_IN, IO_OUT, {1: lin("lt_pref", 2)},
             config_extra="\n".join(["dynamic_batching {\n  preferred_batch_size: [4, 8]\n"
                                     "  max_queue_delay_microseconds: 2000\n}", _target("5")]))
    repo.add("lt_off", 16, IO_IN, IO_OUT, {1: lin("lt_off", 3)},
             config_extra="\n".join([TWO_CPU, "dynamic_batching { }"]))
    for i, (name, (v, _)) in enumerate(BAD.items()):
        repo.add(name, 8, IO_IN, IO_OUT, {1: lin(name, 4 + i)},
                 config_extra="\n".join(["dynamic_batching { }", _target(v)]), expect="UNAVAILABLE")
    # a target needs batches of more than one (and dynamic batching, which completion adds to a
    # config that names no scheduler when max_batch_size > 1: that case is test_model_config.c's)
    repo.add("lt_mbs1", 1, IO_IN, IO_OUT, {1: lin("lt_mbs1", 10)},
             config_extra="\n".join(["dynamic_batching { }", _target("5")]), expect="UNAVAILABLE")
    return d, repo.specs


@pytest.fixture(scope="module")
def lt_server(lt_repo):
    yield from lib.served(lt_repo[0], ["--strict-readiness", "false"])


def _drive(srv, repo, model):
    import tritonclient.grpc as grpcclient
    oracle = lib.Oracle(repo[0], repo[1])

    def client(k):
        rng = np.random.default_rng(2000 + k)
        bad = 0
        with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
            for _ in range(PER_CLIENT):
                feeds = lib.random_inputs(repo[1][model], rng, 1)
                _, got = lib.infer(c, model, feeds)
                want = oracle.run(model, feeds)["V_Y"]
                bad += not np.allclose(got["V_Y"], want, rtol=1e-5, atol=1e-6)
        return bad

    with ThreadPoolExecutor(CLIENTS) as ex:
        assert sum(ex.map(client, range(CLIENTS))) == 0
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        st = lib.model_stats(c, model)
        assert st.inference_count == CLIENTS * PER_CLIENT
        assert st.inference_stats.success.count == CLIENTS * PER_CLIENT
        return st


@pytest.mark.parametrize("model,target_s", [("lt_on", 0.020), ("lt_pref", 0.005)])
def test_target_answers_and_metrics(lt_server, lt_repo, model, target_s):
    st = _drive(lt_server, lt_repo, model)
    execs = st.execution_count
    assert 0 < execs <= CLIENTS * PER_CLIENT
    m = lib.scrape_metrics(lt_server)
    v = lambda name: lib.metric_sum(m, name, model=model, version="1")  # noqa: E731
    assert v("inferd_latency_target_seconds") == pytest.approx(target_s)
    # every execution went through the policy, and every one that ran was measured
    assert v("inferd_latency_target_batches_total") == execs
    assert v("inferd_latency_target_compute_observed_total") == execs
    assert v("inferd_latency_target_compute_measured_seconds_total") > 0
    # the first batch goes before anything is measured (predicted 0); the rest are predicted
    assert v("inferd_latency_target_compute_predicted_seconds_total") > 0
    assert 0 <= v("inferd_latency_target_early_batches_total") <= execs
    assert 1 <= v("inferd_latency_target_last_batch_size") <= 16
    assert 1 <= v("inferd_latency_target_goal_batch_size") <= 16
    assert v("inferd_latency_target_last_wait_seconds") >= 0
    assert v("inferd_latency_target_arrival_rate") > 0
    sizes = {b.batch_size: b.compute_infer.count for b in st.batch_stats}
    assert sum(k * n for k, n in sizes.items()) == CLIENTS * PER_CLIENT
    if model == "lt_pref":
        # preferred sizes still decide what goes: the largest met in the queue (4 or 8), or what
        # was queued below the first (1-3); never 5-7 or more than 8
        assert set(sizes) <= {1, 2, 3, 4, 8}, sizes


def test_no_target_no_policy_metrics(lt_server, lt_repo):
    _drive(lt_server, lt_repo, "lt_off")
    m = lib.scrape_metrics(lt_server)
    assert not lib.metric_present(m, "inferd_latency_target_seconds", model="lt_off")
    assert not lib.metric_present(m, "inferd_latency_target_batches_total", model="lt_off")


def test_bad_targets_fail_their_model_alone(lt_server):
    import tritonclient.grpc as grpcclient
    reasons = dict((k, r) for k, (_, r) in BAD.items())
    reasons["lt_mbs1"] = "latency_target_ms '5' needs max_batch_size > 1"
    with grpcclient.InferenceServerClient(url=lt_server.grpc_url) as c:
        index = {m.name: m for m in c.get_model_repository_index().models}
        for name, reason in reasons.items():
            assert index[name].state == "UNAVAILABLE" and reason in index[name].reason, (name, index[name].reason)
        assert c.is_model_ready("lt_on") and c.is_model_ready("lt_pref") and c.is_model_ready("lt_off")
