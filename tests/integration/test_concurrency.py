"""Many clients at once: 64 threads x 100 requests on the MLP, each answer checked against
onnxruntime, the statistics add up, and the server is still up and serving afterwards."""

import concurrent.futures as cf
import threading

import numpy as np
import tritonclient.grpc as grpcclient

import inferd_testlib as lib

CLIENTS = 64
REQUESTS = 100
DISTINCT = 6  # distinct random inputs per client, cycled; their references are computed up front


def _worker(url, spec, cases, ids, start_barrier):
    c = grpcclient.InferenceServerClient(url=url)
    try:
        start_barrier.wait(60)
        sent = 0
        for r in range(REQUESTS):
            feeds, want = cases[r % len(cases)]
            rid = "%d-%d" % (ids, r)
            res, got = lib.infer(c, "mlp", feeds, request_id=rid)
            assert res.get_response().id == rid
            lib.check_outputs(got, want, spec, what="client %d request %d" % (ids, r))
            sent += feeds["INPUT0"].shape[0]
        return sent
    finally:
        c.close()


def test_64_clients_x_100_requests(server, client, specs, oracle, rng):
    spec = specs["mlp"]
    st0 = client.get_inference_statistics("mlp", "1").model_stats[0]
    cases = []
    for i in range(CLIENTS):
        per = []
        for j in range(DISTINCT):
            feeds = lib.random_inputs(spec, rng, int(rng.integers(1, 5)))
            per.append((feeds, oracle.run("mlp", feeds)))
        cases.append(per)
    barrier = threading.Barrier(CLIENTS)
    with cf.ThreadPoolExecutor(CLIENTS) as ex:
        futs = [ex.submit(_worker, server.grpc_url, spec, cases[i], i, barrier) for i in range(CLIENTS)]
        done, not_done = cf.wait(futs, timeout=600)
        assert not not_done, "%d clients did not finish in 600s" % len(not_done)
        sent = sum(f.result() for f in futs)  # re-raises the first client's failure
    st1 = client.get_inference_statistics("mlp", "1").model_stats[0]
    assert st1.inference_stats.success.count - st0.inference_stats.success.count == CLIENTS * REQUESTS
    assert st1.inference_count - st0.inference_count == sent
    execs = st1.execution_count - st0.execution_count
    assert 1 <= execs <= CLIENTS * REQUESTS
    print("64x100: %d requests, %d inferences in %d executions (mean batch %.2f)"
          % (CLIENTS * REQUESTS, sent, execs, sent / execs))
    # Still serving, on the shared client too.
    assert server.alive() and client.is_server_ready()
    feeds = lib.random_inputs(spec, rng, 3)
    _, got = lib.infer(client, "mlp", feeds)
    lib.check_outputs(got, oracle.run("mlp", feeds), spec)


def test_concurrent_mixed_models(server, specs, oracle, rng):
    """Different models (batched, unbatched, fp16, multi-input) in flight at once through one channel."""
    names = ["mlp", "ops_gemm", "ops_elementwise", "ops_matmul", "ops_norm", "fp16_io", "ops_shape"]
    work = []
    for k in range(140):
        n = names[k % len(names)]
        spec = specs[n]
        b = int(rng.integers(1, spec["max_batch_size"] + 1)) if spec["max_batch_size"] else 1
        feeds = lib.random_inputs(spec, rng, b)
        work.append((n, feeds, oracle.run(n, feeds)))
    c = grpcclient.InferenceServerClient(url=server.grpc_url)
    try:
        def one(item):
            n, feeds, want = item
            _, got = lib.infer(c, n, feeds)
            lib.check_outputs(got, want, specs[n], what=n)
        with cf.ThreadPoolExecutor(16) as ex:
            list(ex.map(one, work, timeout=300))
    finally:
        c.close()
    assert server.alive()
