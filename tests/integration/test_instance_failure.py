"""An instance that fails for good (a GPU plan that cannot be recreated after a sticky CUDA error: launch
failure, illegal address, ECC) must take its model version out of service, not fail every request with INTERNAL
and a log line while the server stays live and ready (a soak: 7.6M failures in 13 minutes, each logged).
Without a GPU, INFERD_CPU_FAULT_FATAL_AT=N makes every CPU instance's Nth batch fail the way a sticky error
fails a GPU instance (engine/model.c): after it, the model is not ready, the index says why, strict readiness
and liveness turn false (a poisoned device only comes back with a new process), requests are refused at once
with UNAVAILABLE, and the log holds one line per 10 s with a count, not one per request."""

import time

import pytest

import inferd_testlib as lib

g = lib.gen_models
IO_IN, IO_OUT = [g._io("V_X", "FP32", [8])], [g._out("V_Y", "FP32", [4])]
FATAL_AT = 3
REFUSED = 400


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("fail_repo"))
    r = g.Repo(d)
    r.add("doomed", 8, IO_IN, IO_OUT, {1: g._small_linear("doomed", 1)})
    r.add("bystander", 8, IO_IN, IO_OUT, {1: g._small_linear("bystander", 2)})
    r.add("pair", 8, IO_IN, IO_OUT, {1: g._small_linear("pair", 3)},
          config_extra="instance_group [\n  {\n    count: 2\n    kind: KIND_CPU\n  }\n]")
    return d, r.specs


def test_permanent_failure_takes_the_model_and_process_out(repo, rng):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException
    d, specs = repo
    srv = lib.ServerProcess(d, env={"INFERD_CPU_FAULT_FATAL_AT": str(FATAL_AT)})  # strict readiness: the default
    srv.start()
    try:
        with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
            assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("doomed")
            for k in range(1, FATAL_AT):
                lib.infer(c, "doomed", lib.random_inputs(specs["doomed"], rng, 1))
            with pytest.raises(InferenceServerException) as ei:  # the batch that hits the fault
                lib.infer(c, "doomed", lib.random_inputs(specs["doomed"], rng, 1))
            assert lib.status_name(ei.value) == "INTERNAL", lib.error_message(ei.value)
            assert "injected context-fatal fault" in lib.error_message(ei.value)

            assert not c.is_model_ready("doomed")
            assert not c.is_server_ready()  # strict readiness: every model must be
            assert not c.is_server_live()   # a poisoned device: only a restart helps
            assert c.is_model_ready("bystander")  # its own instance never failed
            assert lib.http_get(srv.http_url + "/v2/health/ready")[0] == 503
            assert lib.http_get(srv.http_url + "/v2/health/live")[0] == 503
            assert lib.http_get(srv.http_url + "/v2/models/doomed/ready")[0] == 503
            index = {(m.name, m.version): m for m in c.get_model_repository_index().models}
            x = index[("doomed", "1")]
            assert x.state == "UNAVAILABLE", x
            assert "every instance failed permanently" in x.reason and "injected" in x.reason, x.reason
            assert index[("bystander", "1")].state == "READY"

            feeds = lib.random_inputs(specs["doomed"], rng, 1)
            t0 = time.monotonic()
            codes, msgs = {}, set()
            for _ in range(REFUSED):
                try:
                    lib.infer(c, "doomed", feeds)
                    codes["OK"] = codes.get("OK", 0) + 1
                except InferenceServerException as ex:
                    codes[lib.status_name(ex)] = codes.get(lib.status_name(ex), 0) + 1
                    msgs.add(lib.error_message(ex))
            took = time.monotonic() - t0
            assert codes == {"UNAVAILABLE": REFUSED}, codes
            assert len(msgs) == 1 and "model 'doomed' version 1 is not ready" in msgs.pop()
            assert took < 20, took  # refused before any queue: ~1 ms each; generous for ASan on 2 busy cores
            st = c.get_inference_statistics("doomed").model_stats[0]
            assert st.inference_stats.success.count == FATAL_AT - 1
            assert st.inference_stats.fail.count == 1 + REFUSED  # REJECTED ones counted as failures too
            # the bystander still answers: the process is not ready, but nothing else broke
            lib.infer(c, "bystander", lib.random_inputs(specs["bystander"], rng, 1))
        srv.await_stderr(lambda lines: any("requests refused" in ln for ln in lines))
        log = srv.stderr_text()
        refused = [ln for ln in log.splitlines() if "model 'doomed'" in ln and "requests refused" in ln]
        failed = [ln for ln in log.splitlines() if "model 'doomed'" in ln and "execution failed" in ln]
        assert len(failed) == 1 and 1 <= len(refused) <= 2, (failed, refused)  # 10 s per line, not per request
    finally:
        srv.stop()
    srv.assert_clean_exit()


def test_a_failed_instance_gets_no_more_batches(repo, rng):
    """Two instances, the first failing for good at its FATAL_AT-th batch: from then on the scheduler gives
    it no batch (it would refuse each at once and, idle first, draw most of them), so every later request is
    served by the other one; the model stays ready, but the poisoned "device" makes the process not live."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException
    d, specs = repo
    srv = lib.ServerProcess(d, env={"INFERD_CPU_FAULT_FATAL_AT": str(FATAL_AT)})
    srv.start()
    try:
        with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
            seen = []
            for _ in range(4 * FATAL_AT + 20):
                try:
                    lib.infer(c, "pair", lib.random_inputs(specs["pair"], rng, 1))
                    seen.append("OK")
                except InferenceServerException as ex:
                    seen.append(lib.status_name(ex))
            assert seen.count("INTERNAL") == 1 and seen.count("OK") == len(seen) - 1, seen
            assert c.is_model_ready("pair")  # one instance left
            assert not c.is_server_live()
            st = c.get_inference_statistics("pair").model_stats[0]
            assert st.inference_stats.success.count == len(seen) - 1
    finally:
        srv.stop()
    srv.assert_clean_exit()
