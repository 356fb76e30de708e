"""Batch sizes prepared at load (issue 32, engine/batch_sizes.h, engine/model_prepare.c): which sizes an
instance prepares within --model-prepare-budget-s, a batch of a size not prepared run padded to the next
prepared one with the added rows' results dropped, and inferd_lazy_prepares_total counting what still
prepared on the request path.

The CPU plan has nothing per batch size to prepare, so a CPU instance prepares nothing and pads nothing
unless a test hook says so: INFERD_PREPARE_SIZES (exactly these sizes) or INFERD_PREPARE_FAKE_MS (each
size counts that many ms against the budget). Under them a CPU instance chooses and pads as a GPU one does,
which is what these tests drive: every batch size 1..max_batch_size answered as onnxruntime answers it,
padded batches and rows and lazy prepares counted exactly. The GPU side: tests/gpu/test_gpu_plan_prepare.c
and test_gpu_prepare.py."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import inferd_testlib as lib

g = lib.gen_models
MAXB = 8


def _two_io(name):
    """Y1 = X1 @ W + X2, Y2 = Relu(X1): two inputs and two outputs, every one batched."""
    rng = np.random.default_rng(7)
    nodes = [helper.make_node("MatMul", ["P_X1", "P_W"], ["mm"]),
             helper.make_node("Add", ["mm", "P_X2"], ["P_Y1"]),
             helper.make_node("Relu", ["P_X1"], ["P_Y2"])]
    return g._model(name, nodes, [g._vi("P_X1", TensorProto.FLOAT, [None, 6]), g._vi("P_X2", TensorProto.FLOAT, [None, 3])],
                    [g._vi("P_Y1", TensorProto.FLOAT, [None, 3]), g._vi("P_Y2", TensorProto.FLOAT, [None, 6])],
                    [g._init("P_W", g._w(rng, 6, 3))])


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    def add(r):
        io_in, io_out = [g._io("V_X", "FP32", [8])], [g._out("V_Y", "FP32", [4])]
        r.add("prep_lin", MAXB, io_in, io_out, {1: g._small_linear("prep_lin", 11)},
              config_extra="instance_group [ { count: 2, kind: KIND_CPU } ]")
        r.add("prep_two", MAXB, [g._io("P_X1", "FP32", [6]), g._io("P_X2", "FP32", [3])],
              [g._out("P_Y1", "FP32", [3]), g._out("P_Y2", "FP32", [6])], {1: _two_io("prep_two")})
        # a preferred size is prepared whatever the budget
        r.add("prep_pref", MAXB, io_in, io_out, {1: g._small_linear("prep_pref", 12)},
              config_extra="dynamic_batching { preferred_batch_size: [ 6 ] }")
    return lib.generated_repo(tmp_path_factory, "prep_repo", [add])


@pytest.fixture(scope="module")
def oracle(repo):
    return lib.Oracle(*repo)


def _sweep(srv, repo, oracle, models):
    """Every batch size 1..MAXB of each model, one request each (each its own batch), checked against
    onnxruntime: a padded row leaking into an answer shows as a wrong shape or value."""
    d, specs = repo
    rng = np.random.default_rng(lib.seed_from_env())
    import tritonclient.grpc as grpcclient
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    try:
        for name in models:
            spec = specs[name]
            for n in range(1, MAXB + 1):
                feeds = lib.random_inputs(spec, rng, batch=n)
                _, got = lib.infer(c, name, feeds)
                want = oracle.run(name, feeds)
                for o in spec["outputs"]:
                    assert got[o["name"]].shape == (n,) + tuple(o["dims"]), (name, n, o["name"], got[o["name"]].shape)
                lib.check_outputs(got, want, spec, what="%s batch %d" % (name, n))
    finally:
        c.close()


def _counts(srv, model):
    m = lib.scrape_metrics(srv)
    return tuple(int(lib.metric_sum(m, k, model=model)) for k in
                 ("inferd_padded_batches_total", "inferd_padded_rows_total", "inferd_lazy_prepares_total"))


def _server(repo, env, args=()):
    srv = lib.ServerProcess(repo[0], list(args), env=env)
    try:
        srv.start()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    return srv


def _stop(srv):
    srv.stop()
    srv.assert_clean_exit()


def test_listed_sizes_pad_the_others(repo, oracle):
    """Sizes 1, 4 and 8 prepared: 2, 3 run at 4 and 5, 6, 7 at 8; nothing lazy."""
    srv = _server(repo, {"INFERD_PREPARE_SIZES": "1,4,8"})
    try:
        _sweep(srv, repo, oracle, ["prep_lin", "prep_two"])
        # padded: 2->4, 3->4, 5->8, 6->8, 7->8; rows added 2+1+3+2+1
        assert _counts(srv, "prep_lin") == (5, 9, 0)
        assert _counts(srv, "prep_two") == (5, 9, 0)
    finally:
        _stop(srv)


def test_sizes_past_the_largest_prepared_are_lazy(repo, oracle):
    """Sizes 1 and 4 prepared on a model of max_batch_size 8: 2 and 3 pad to 4, and 5..8 have nothing to
    pad to, so they run at their own size and count as lazy prepares (a GPU plan would capture them)."""
    srv = _server(repo, {"INFERD_PREPARE_SIZES": "1,4"})
    try:
        _sweep(srv, repo, oracle, ["prep_lin"])
        assert _counts(srv, "prep_lin") == (2, 3, 4)
        # each counted under its cause: a signature never captured (no buffers moved, nothing tuned on a CPU)
        m = lib.scrape_metrics(srv)
        causes = {c: int(lib.metric_sum(m, "inferd_lazy_prepare_causes_total", model="prep_lin", cause=c))
                  for c in ("graph", "stale_graph", "gemm", "cudnn")}
        assert causes == {"graph": 4, "stale_graph": 0, "gemm": 0, "cudnn": 0}, causes
        assert all(lib.metric_present(m, "inferd_lazy_prepare_causes_total", model="prep_lin", cause=c) for c in causes)
    finally:
        _stop(srv)


def test_budget_chooses_the_sizes(repo, oracle):
    """300 ms a size against a 1 s budget: 1, the largest and the preferred 6 first (900 ms, whatever
    the budget), then no other size fits: 2..5 pad to 6 and 7 to 8."""
    srv = _server(repo, {"INFERD_PREPARE_FAKE_MS": "300"}, ["--model-prepare-budget-s", "1"])
    try:
        _sweep(srv, repo, oracle, ["prep_pref", "prep_lin"])
        assert _counts(srv, "prep_pref") == (5, 4 + 3 + 2 + 1 + 1, 0)
        # without a preferred size the budget's 1 s holds 1, 8, then 2 (900 ms): 3..7 pad to 8
        assert _counts(srv, "prep_lin") == (5, 5 + 4 + 3 + 2 + 1, 0)
    finally:
        _stop(srv)


def test_cpu_default_prepares_nothing_and_pads_nothing(repo, oracle):
    srv = _server(repo, None)
    try:
        _sweep(srv, repo, oracle, ["prep_lin"])
        m = lib.scrape_metrics(srv)
        for k in ("inferd_padded_batches_total", "inferd_padded_rows_total", "inferd_lazy_prepares_total"):
            assert lib.metric_present(m, k, model="prep_lin", version="1"), k
        assert _counts(srv, "prep_lin") == (0, 0, 0)
    finally:
        _stop(srv)


def test_bad_hook_fails_the_load_naming_it(repo):
    srv = _server(repo, {"INFERD_PREPARE_SIZES": "1,99"})
    try:
        lines = srv.await_stderr(lambda ls: any("prep_lin" in l and "failed to load" in l for l in ls))
        bad = [l for l in lines if "prep_lin" in l and "failed to load" in l]
        assert "INFERD_PREPARE_SIZES" in bad[0] and "1..8" in bad[0], bad
    finally:
        _stop(srv)


@pytest.mark.parametrize("val", ["-1", "x", "86401"])
def test_bad_budget_flag_refused(tmp_path, val):
    err = lib.start_fails(str(tmp_path), ["--model-prepare-budget-s", val])
    assert "--model-prepare-budget-s" in err, err


def _slow(repo_dir):
    """Y = X @ W @ W @ W @ W with W 2048x2048: a batch of 64 rows takes tens of ms on a few cores."""
    import os
    w = np.random.default_rng(3).standard_normal((2048, 2048)).astype(np.float32) * 0.01
    nodes = [helper.make_node("MatMul", [a, "W"], [b]) for a, b in [("X", "T1"), ("T1", "T2"), ("T2", "T3"), ("T3", "Y")]]
    m = g._model("slow", nodes, [g._vi("X", TensorProto.FLOAT, [None, 2048])], [g._vi("Y", TensorProto.FLOAT, [None, 2048])],
                 [g._init("W", w)])
    os.makedirs(os.path.join(repo_dir, "slow", "1"))
    import onnx
    onnx.save_model(m, os.path.join(repo_dir, "slow", "1", "model.onnx"))
    with open(os.path.join(repo_dir, "slow", "config.pbtxt"), "w") as f:
        f.write(g._config("slow", 64, [g._io("X", "FP32", [2048])], [g._out("Y", "FP32", [2048])]))


def test_sigterm_ends_a_load_in_preparation(tmp_path):
    """A load whose preparation would run for minutes (size 64 prepared 2,000 times over, through the
    tests' hook): SIGTERM ends it before its next size, the load fails as cancelled and the process exits 0
    promptly, as a warmup does (test_warmup_limits.py)."""
    import signal
    import threading
    import time
    import tritonclient.grpc as grpcclient
    _slow(str(tmp_path))
    srv = lib.ServerProcess(str(tmp_path), ["--model-control-mode", "explicit"],
                            env={"INFERD_PREPARE_SIZES": ",".join(["64"] * 2000)})
    try:
        srv.start()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    outcome = {}

    def load():
        try:
            with grpcclient.InferenceServerClient(srv.grpc_url) as c:
                c.load_model("slow", client_timeout=300)
            outcome["ok"] = True
        except Exception as e:  # noqa: BLE001 (asserted below)
            outcome["error"] = e

    th = threading.Thread(target=load, daemon=True)
    try:
        th.start()
        with grpcclient.InferenceServerClient(srv.grpc_url) as c:
            deadline = time.monotonic() + 60
            state = None
            while time.monotonic() < deadline:  # the index says LOADING while the load thread works on it
                idx = c.get_model_repository_index(as_json=True).get("models", [])
                state = next((m.get("state") for m in idx if m.get("name") == "slow"), None)
                if state == "LOADING" or not th.is_alive():
                    break
            assert state == "LOADING" and th.is_alive(), (state, outcome)
        t0 = time.monotonic()
        srv.send_signal(signal.SIGTERM)
        rc = srv.wait_exit(timeout=30)
        took = time.monotonic() - t0
        th.join(timeout=20)
        assert rc == 0, "exit status %r after SIGTERM (took %.1f s); tail:\n%s" % (rc, took, srv.stderr_tail())
        assert took < 20, took
        assert any("slow" in l and "cancelled: server shutting down" in l for l in srv.stderr_text().splitlines()), \
            srv.stderr_tail()
        assert "ok" not in outcome, outcome
        assert not srv.sanitizer_lines(), srv.stderr_tail()
    finally:
        if srv.alive():
            srv.proc.kill()
            srv.proc.wait()
