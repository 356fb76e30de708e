"""ModelStatistics and the Prometheus /metrics page count exactly what this test sent (deltas,
so the shared server's earlier traffic does not matter; tests run one at a time)."""

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

BATCHES = [1, 2, 3, 5]  # sent one at a time from one client, so each executes alone


def _send_ok(client, specs, oracle, rng):
    for b in BATCHES:
        feeds = lib.random_inputs(specs["mlp"], rng, b)
        _, got = lib.infer(client, "mlp", feeds)
        lib.check_outputs(got, oracle.run("mlp", feeds), specs["mlp"])


def _send_bad(client, n):
    bad = grpcclient.InferInput("INPUT0", [1, 7], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 7), np.float32))
    for _ in range(n):
        with pytest.raises(InferenceServerException):
            client.infer("mlp", [bad])


def test_model_statistics_deltas(client, specs, oracle, rng):
    before, other_before = lib.model_stats(client, "mlp"), lib.model_stats(client, "ops_gemm")
    _send_ok(client, specs, oracle, rng)
    _send_bad(client, 2)
    after, other_after = lib.model_stats(client, "mlp"), lib.model_stats(client, "ops_gemm")
    n = len(BATCHES)
    assert after.inference_count - before.inference_count == sum(BATCHES)
    assert after.execution_count - before.execution_count == n
    s0, s1 = before.inference_stats, after.inference_stats
    assert s1.success.count - s0.success.count == n
    assert s1.success.ns > s0.success.ns
    assert s1.compute_infer.ns > s0.compute_infer.ns
    assert s1.fail.count - s0.fail.count == 2
    assert after.last_inference > 0 and after.last_inference >= before.last_inference
    # Per-model: another model's counters did not move.
    assert other_after.inference_count == other_before.inference_count
    assert other_after.execution_count == other_before.execution_count


def test_model_statistics_all_versions_and_unknown(client):
    resp = client.get_inference_statistics("versioned")
    assert sorted(m.version for m in resp.model_stats if m.name == "versioned") == ["2", "3"]
    with pytest.raises(InferenceServerException) as ei:
        client.get_inference_statistics("no_such_model_stats")
    assert lib.status_name(ei.value) == "NOT_FOUND"
    assert "no_such_model_stats" in lib.error_message(ei.value)


def test_metrics_deltas(server, client, specs, oracle, rng):
    m0 = lib.scrape_metrics(server)
    _send_ok(client, specs, oracle, rng)
    _send_bad(client, 3)
    m1 = lib.scrape_metrics(server)
    lab = {"model": "mlp", "version": "1"}

    def d(name):
        return lib.metric_sum(m1, name, **lab) - lib.metric_sum(m0, name, **lab)
    assert lib.metric_present(m1, "nv_inference_request_success", **lab)
    assert d("nv_inference_request_success") == len(BATCHES)
    assert d("nv_inference_count") == sum(BATCHES)
    assert d("nv_inference_exec_count") == len(BATCHES)
    assert d("nv_inference_request_failure") == 3
    fails = [l for n, l, _ in m1 if n == "nv_inference_request_failure" and l.get("model") == "mlp"]
    assert fails and all("reason" in l and l.get("version") == "1" for l in fails), fails
    # Counters agree with ModelStatistics for the same model.
    st = lib.model_stats(client, "mlp")
    assert lib.metric_sum(m1, "nv_inference_request_success", **lab) == st.inference_stats.success.count
    assert lib.metric_sum(m1, "nv_inference_count", **lab) == st.inference_count
    assert lib.metric_sum(m1, "nv_inference_exec_count", **lab) == st.execution_count


def test_metrics_text_format(server):
    status, text = lib.http_get(server.http_url + "/metrics")
    assert status == 200
    samples = lib.parse_metrics(text)  # asserts every line parses
    names = {n for n, _, _ in samples}
    for n in ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count"):
        assert n in names, (n, sorted(names))
    assert "# TYPE nv_inference_request_success counter" in text


def test_metrics_cuda_shm_inputs_by_path(server, client, specs, oracle, rng):
    """inferd_cuda_shm_inputs_total has a device and a host series per loaded version; requests with
    inline inputs count in neither (CUDA regions are counted by tests/gpu/cuda_shm_check.py on a GPU)."""
    m0 = lib.scrape_metrics(server)
    for path in ("device", "host"):
        assert lib.metric_present(m0, "inferd_cuda_shm_inputs_total", model="mlp", version="1", path=path), path
    _send_ok(client, specs, oracle, rng)
    m1 = lib.scrape_metrics(server)
    for path in ("device", "host"):
        lab = dict(model="mlp", version="1", path=path)
        assert (lib.metric_sum(m1, "inferd_cuda_shm_inputs_total", **lab)
                == lib.metric_sum(m0, "inferd_cuda_shm_inputs_total", **lab)), path


def test_model_statistics_memory_usage(server, client, specs, oracle, rng):
    """memory_usage says what the seed mlp's instance holds: on the CPU its activation arena (at least
    one batch of max_batch_size rows of the input, output and hidden layer); on a GPU the device memory
    (at least its weights) and the pinned staging."""
    feeds = lib.random_inputs(specs["mlp"], rng, 2)
    _, got = lib.infer(client, "mlp", feeds)
    lib.check_outputs(got, oracle.run("mlp", feeds), specs["mlp"])
    st = client.get_inference_statistics("mlp", "1").model_stats[0]
    mem = {(m.type, m.id): m.byte_size for m in st.memory_usage}
    mbs = specs["mlp"]["max_batch_size"]
    if "CUDA device 0:" in server.stderr_text():
        weights = (1024 * 512 + 512 + 512 * 10 + 10) * 4
        assert mem.get(("GPU", 0), 0) >= weights, mem
        assert mem.get(("CPU_PINNED", 0), 0) >= mbs * (1024 + 10) * 4, mem
    else:
        assert set(mem) == {("CPU", 0)}, mem
        assert mem[("CPU", 0)] >= mbs * (1024 + 10) * 4, mem


def test_statistics_answered_beside_inference_on_one_channel(server, client):
    """perf_analyzer's measurement loop asks ModelStatistics at each window's edge, with no deadline, on a
    channel it shares with its inference streams (issue 14): a statistics answer lost or held behind the
    inference calls would stall it for good. tests/gpu/stats_probe.py keeps 64 ModelInfer calls in flight on
    ONE channel and polls ModelStatistics on it, every call with a deadline, and fails on any call that failed,
    ran past its deadline or was never answered."""
    import json
    import subprocess
    import sys
    before = lib.model_stats(client, "mlp")
    probe = [sys.executable, lib.REPO_ROOT + "/tests/gpu/stats_probe.py", "--url", server.grpc_url,
             "--model", "mlp", "--concurrency", "64", "--channels", "1", "--seconds", "4",
             "--stats-deadline", "5", "--infer-deadline", "10"]
    p = subprocess.run(probe, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(p.stdout[:p.stdout.rindex("}") + 1])
    assert r["infer_ok"] > 64 and r["stats_calls"] > 0, r
    assert r["infer_errors"] == {} and r["infer_unanswered"] == 0 and r["stats_errors"] == {} and r["stats_bad"] == 0, r
    after = lib.model_stats(client, "mlp")
    # every answer the probe counted was a success on the server (the shared server sees nothing else now)
    assert after.inference_stats.success.count - before.inference_stats.success.count == r["infer_ok"]
