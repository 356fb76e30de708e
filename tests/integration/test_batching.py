"""The dynamic batcher through the real server (Triton semantics): preferred sizes, the queue delay,
no batching without dynamic_batching, multi-row requests, shape keys, priority levels, queue
policies (max_queue_size, REJECT/DELAY timeouts, timeout override), client cancellation and
deadlines, preserve_ordering, and many clients on the seed MLP.

Most tests run on a private server serving gen_models' "batching" set with
--disable-auto-complete-config (so a config without dynamic_batching really has none). Every
count is exact: batch_stats deltas name each execution's size. Timing-dependent setups are
made deterministic with a deliberately slow request (bt_slow* models, L=512: ~0.5 s) that holds
the only instance while the test queues requests behind it, awaiting
nv_inference_pending_request_count (queued + running) rather than sleeping.
"""

import concurrent.futures as cf
import functools
import os
import threading
import time
import types

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

WAIT_S = 30           # bound on every await (pending count, statistics, callbacks)
SLOW_L = 512          # rows of L=512 take ~0.5 s on the 2-core box: the instance-holding request
CHEAP_L = 8           # a queued request that runs in a few ms


# --- fixtures

@pytest.fixture(scope="module")
def bat(tmp_path_factory):
    """The batching repository's server: .srv, .client, .specs, .oracle, .repo."""
    d = str(tmp_path_factory.mktemp("batching_repo"))
    specs = lib.gen_models.generate(d, "batching")
    srv = lib.ServerProcess(d, ["--disable-auto-complete-config"])
    try:
        srv.start()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    _calibrate_slow(c)
    yield types.SimpleNamespace(srv=srv, client=c, specs=specs, oracle=lib.Oracle(d, specs), repo=d)
    c.close()
    srv.stop()
    srv.assert_clean_exit()


SLOW_TARGET_S = 0.8  # the instance-holding request must outlast the 100-150 ms timeouts by far


def _calibrate_slow(client):
    """Scales SLOW_L so the instance-holding request takes about SLOW_TARGET_S on
    this machine (a 16-core host runs L=512 several times faster than the
    2-core box the timeouts were chosen on). Cost is linear in L. Timed warm:
    a server's first requests pay for thread start-up and first-touch page
    faults and would make a cold timing look slow enough (seen: L=512 kept,
    then the warm request ran in a fraction of the 100 ms queue timeouts)."""
    global SLOW_L
    rng = np.random.default_rng(0)
    client.infer("bt_slow", lib.triton_inputs(slow_feeds(rng, L=SLOW_L)))  # warm-up, untimed
    for _ in range(4):
        ts = []
        for _ in range(2):
            t = time.perf_counter()
            client.infer("bt_slow", lib.triton_inputs(slow_feeds(rng, L=SLOW_L)))
            ts.append(time.perf_counter() - t)
        dt = min(ts)
        if dt >= SLOW_TARGET_S or SLOW_L >= 16384:
            break
        SLOW_L = min(16384, int(SLOW_L * SLOW_TARGET_S * 1.2 / max(dt, 1e-3)) + 1)
    print("slow request: L=%d takes %.2f s here" % (SLOW_L, dt))


class HolderTooShort(Exception):
    """The instance-holding request finished before the test had queued what it needed behind it:
    a fact about this machine's speed at that moment, not about the server."""


HOLD_SCALE = [1]  # multiplies the holder's cost on a retry after HolderTooShort


def hold_L(fraction=1.0):
    return max(1, int(SLOW_L * HOLD_SCALE[0] * fraction))


def holder_still_running(calls, key, model):
    if calls.done(key):
        raise HolderTooShort(model)


def holder_retry(test):
    """Runs a test whose setup queues requests behind a slow one; when a busy machine let the slow
    one finish first (HolderTooShort), waits for the model to go idle and runs the test again with
    a holder twice as costly (at most 3 tries). The assertions themselves are never retried."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        bat = kwargs["bat"]
        try:
            for attempt in range(3):
                try:
                    return test(*args, **kwargs)
                except HolderTooShort as e:
                    if attempt == 2:
                        raise AssertionError("the holding request finished before the queue was built, "
                                             "3 times, at up to %dx its cost" % HOLD_SCALE[0]) from e
                    await_pending(bat.srv, e.args[0], 0)
                    if "stream_calls" in kwargs:
                        kwargs["stream_calls"].restart()
                    HOLD_SCALE[0] *= 2
                    print("holder too short on a busy machine: retrying at %dx" % HOLD_SCALE[0])
        finally:
            HOLD_SCALE[0] = 1
    return run


@pytest.fixture(autouse=True)
def _batching_server_still_up(request):
    yield
    if "bat" in request.fixturenames:
        srv = request.getfixturevalue("bat").srv
        assert srv.alive(), "inferd (batching repo) exited (code %r) during this test; stderr tail:\n%s" % (
            srv.proc.poll(), srv.stderr_tail())


# --- helpers

def _table(st):
    """{batch size: executions} from ModelStatistics.batch_stats (zero rows left out)."""
    return {b.batch_size: b.compute_infer.count for b in st.batch_stats if b.compute_infer.count}


def _table_delta(before, after):
    t0, t1 = _table(before), _table(after)
    d = {k: t1.get(k, 0) - t0.get(k, 0) for k in set(t0) | set(t1)}
    return {k: v for k, v in d.items() if v}


class Snap:
    """Statistics before a test step; settle() waits until the server has accounted `rows` more rows."""

    def __init__(self, client, model):
        self.client, self.model = client, model
        self.st = lib.model_stats(client, model)

    def settle(self, rows):
        # The server answers a request before it adds the execution to the statistics, so the
        # numbers may lag the last response by a moment: poll (bounded) until batch_stats has
        # the rows, then the caller asserts exact values (an extra execution would show).
        end = time.monotonic() + WAIT_S
        while True:
            st = lib.model_stats(self.client, self.model)
            got = sum(k * v for k, v in _table_delta(self.st, st).items())
            if got >= rows or time.monotonic() > end:
                return Delta(self.st, st)
            time.sleep(0.005)

    def settle_failures(self, n):
        end = time.monotonic() + WAIT_S
        while True:
            st = lib.model_stats(self.client, self.model)
            if st.inference_stats.fail.count - self.st.inference_stats.fail.count >= n or time.monotonic() > end:
                return Delta(self.st, st)
            time.sleep(0.005)


class Delta:
    def __init__(self, a, b):
        self.table = _table_delta(a, b)
        self.executions = b.execution_count - a.execution_count
        self.inferences = b.inference_count - a.inference_count
        self.success = b.inference_stats.success.count - a.inference_stats.success.count
        self.fail = b.inference_stats.fail.count - a.inference_stats.fail.count

    def __repr__(self):
        return "table=%s executions=%d inferences=%d success=%d fail=%d" % (
            dict(sorted(self.table.items())), self.executions, self.inferences, self.success, self.fail)


def pending(srv, model):
    return lib.metric_sum(lib.scrape_metrics(srv), "nv_inference_pending_request_count", model=model, version="1")


def await_pending(srv, model, n, holder=None):
    """Polls the pending gauge (queued + running) until it reads n; bounded. holder=(calls, key): the
    request holding the instance; once it has answered while fewer than n are pending, the queue cannot
    be built behind it any more, and HolderTooShort lets holder_retry run the test again."""
    end = time.monotonic() + WAIT_S
    while True:
        p = pending(srv, model)
        if p == n:
            return
        if holder and p < n and holder[0].done(holder[1]):
            raise HolderTooShort(model)
        assert time.monotonic() < end, "pending requests of %s stayed %s, awaited %d" % (model, p, n)
        time.sleep(0.002)


class Calls:
    """async_infer with completion order and times recorded."""

    def __init__(self, client):
        self.client = client
        self.lock = threading.Lock()
        self.results, self.order, self.t_done = {}, [], {}
        self.cond = threading.Condition(self.lock)

    def send(self, key, model, feeds, **kw):
        def cb(result, error):
            with self.cond:
                self.results[key] = (result, error)
                self.order.append(key)
                self.t_done[key] = time.monotonic()
                self.cond.notify_all()
        self.client.async_infer(model, lib.triton_inputs(feeds), cb, **kw)

    def wait(self, keys, timeout=WAIT_S):
        with self.cond:
            ok = self.cond.wait_for(lambda: all(k in self.results for k in keys), timeout)
        assert ok, "unanswered after %ss: %s" % (timeout, [k for k in keys if k not in self.results])

    def done(self, key):
        with self.lock:
            return key in self.results

    def ok(self, key):
        result, error = self.results[key]
        assert error is None, "%s: %s %s" % (key, lib.status_name(error), lib.error_message(error))
        return {o.name: result.as_numpy(o.name) for o in result.get_response().outputs}

    def error(self, key):
        result, error = self.results[key]
        assert error is not None, "%s succeeded, expected an error" % key
        return lib.status_name(error), lib.error_message(error)


class StreamCalls:
    """Requests on one ModelStreamInfer stream (its own client); answers recorded in arrival order."""

    def __init__(self, url):
        self.client = grpcclient.InferenceServerClient(url=url)
        self.cond = threading.Condition()
        self.results, self.order = {}, []
        self.client.start_stream(callback=self._cb)

    def restart(self):
        """A new stream with nothing recorded (stop_stream returns once the old one has ended)."""
        self.client.stop_stream()
        with self.cond:
            self.results, self.order = {}, []
        self.client.start_stream(callback=self._cb)

    def _cb(self, result, error):
        # tritonclient hands a failed request's error_message over without its id: any error here
        # fails wait() (these tests send only requests that must succeed on the stream).
        key = result.get_response().id if result is not None else None
        with self.cond:
            if key is None:
                self.results.setdefault("<stream>", (None, error))
            else:
                self.results[key] = (result, error)
                self.order.append(key)
            self.cond.notify_all()

    def send(self, key, model, feeds, **kw):
        self.client.async_stream_infer(model, lib.triton_inputs(feeds), request_id=str(key), **kw)

    def done(self, key):
        with self.cond:
            return str(key) in self.results

    def wait(self, keys, timeout=WAIT_S):
        keys = [str(k) for k in keys]
        with self.cond:
            ok = self.cond.wait_for(lambda: "<stream>" in self.results or all(k in self.results for k in keys),
                                    timeout)
        assert "<stream>" not in self.results, "stream failed: %s" % (self.results["<stream>"][1],)
        assert ok, "unanswered after %ss: %s" % (timeout, [k for k in keys if k not in self.results])

    def ok(self, key):
        result, error = self.results[str(key)]
        assert error is None, "%s: %s" % (key, error)
        return {o.name: result.as_numpy(o.name) for o in result.get_response().outputs}

    def close(self):
        self.client.stop_stream()
        self.client.close()


@pytest.fixture
def stream_calls(bat):
    sc = StreamCalls(bat.srv.grpc_url)
    yield sc
    sc.close()


def slow_feeds(rng, rows=1, L=CHEAP_L):
    return {"SLOW_X": rng.uniform(-1, 1, (rows, L, 512)).astype(np.float32)}


def _check(b, model, got, feeds, what):
    lib.check_outputs(got, b.oracle.run(model, feeds), b.specs[model], what=what)


# --- the models themselves

def test_batching_models_parse_and_run(bat, pb):
    """The generated configs parse with Triton's proto and state the scheduler the tests rely on."""
    from google.protobuf import text_format
    for name in bat.specs:
        with open(os.path.join(bat.repo, name, "config.pbtxt")) as f:
            cfg = text_format.Parse(f.read(), pb.config.ModelConfig())
        assert cfg.name == name
        assert cfg.HasField("dynamic_batching") == (name not in ("bt_nodyn", "bt_mlp_nodyn")), name
        assert bat.client.is_model_ready(name), name
    # As served (--disable-auto-complete-config): nothing added.
    assert not bat.client.get_model_config("bt_nodyn").config.HasField("dynamic_batching")
    served = bat.client.get_model_config("bt_slow_prio").config.dynamic_batching
    assert (served.priority_levels, served.default_priority_level) == (2, 2)


# --- 1. preferred batch sizes

@pytest.mark.parametrize("n", [4, 8])
def test_preferred_size_goes_at_once(bat, rng, n):
    """preferred [4], delay 5 s, max 8: n concurrent 1-row requests form n/4 batches of exactly 4."""
    m = "bt_pref4"
    snap = Snap(bat.client, m)
    feeds = [lib.random_inputs(bat.specs[m], rng, 1) for _ in range(n)]
    calls = Calls(bat.client)
    t0 = time.monotonic()
    for i, f in enumerate(feeds):
        calls.send(i, m, f)
    calls.wait(range(n))
    elapsed = time.monotonic() - t0
    for i, f in enumerate(feeds):
        _check(bat, m, calls.ok(i), f, "request %d" % i)
    d = snap.settle(n)
    assert d.table == {4: n // 4}, d
    assert (d.executions, d.inferences, d.success, d.fail) == (n // 4, n, n, 0), d
    assert elapsed < 4.0, "a full preferred batch waited for the 5 s queue delay (%.2fs)" % elapsed


@holder_retry
def test_preferred_sizes_2_4_behind_busy_instance(bat, rng):
    """preferred [2, 4], delay 30 s, max 8, one instance: a 2-row request goes at once (preferred 2);
    8 one-row requests queued behind it leave as two batches of 4 (the largest preferred size
    reachable, never 8, never 2); then 2 requests on an idle instance go as one batch of 2. The delay
    is far above any holder. This test caught gRPC's backup poller running on the instance thread while
    its executor was stopped (proto/grpc_offload.h): the holder's 6 MB answer kept that thread 10 s, so
    with a 5 s delay the queued 8 left as one batch (TSan), with 30 s none came in time."""
    m = "bt_slow_pref24"
    snap = Snap(bat.client, m)
    calls = Calls(bat.client)
    a = slow_feeds(rng, rows=2, L=hold_L(0.5))
    qs = [slow_feeds(rng) for _ in range(8)]
    calls.send("A", m, a)
    await_pending(bat.srv, m, 1)
    for i, f in enumerate(qs):
        calls.send(i, m, f)
    await_pending(bat.srv, m, 9, holder=(calls, "A"))
    holder_still_running(calls, "A", m)
    calls.wait(["A"] + list(range(8)))
    _check(bat, m, calls.ok("A"), a, "A")
    for i, f in enumerate(qs):
        _check(bat, m, calls.ok(i), f, "queued %d" % i)
    d = snap.settle(2 + 8)
    assert d.table == {2: 1, 4: 2}, d
    assert (d.executions, d.inferences, d.success, d.fail) == (3, 10, 9, 0), d

    snap = Snap(bat.client, m)
    pair = [slow_feeds(rng) for _ in range(2)]
    t0 = time.monotonic()
    for i, f in enumerate(pair):
        calls.send(("pair", i), m, f)
    calls.wait([("pair", 0), ("pair", 1)])
    assert time.monotonic() - t0 < 4.0, "two requests waited for the queue delay although 2 is preferred"
    for i, f in enumerate(pair):
        _check(bat, m, calls.ok(("pair", i)), f, "pair %d" % i)
    d = snap.settle(2)
    assert d.table == {2: 1} and d.executions == 1, d


# --- 2. the queue delay

def test_partial_batch_waits_for_delay(bat, rng):
    """preferred [4], delay 200 ms: 3 concurrent requests wait the delay, then go as one batch of 3."""
    m = "bt_delay"
    snap = Snap(bat.client, m)
    feeds = [lib.random_inputs(bat.specs[m], rng, 1) for _ in range(3)]
    calls = Calls(bat.client)
    t0 = time.monotonic()
    for i, f in enumerate(feeds):
        calls.send(i, m, f)
    calls.wait(range(3))
    first_done = min(calls.t_done.values()) - t0
    for i, f in enumerate(feeds):
        _check(bat, m, calls.ok(i), f, "request %d" % i)
    d = snap.settle(3)
    assert d.table == {3: 1}, d
    assert (d.executions, d.inferences, d.success) == (1, 3, 3), d
    assert first_done >= 0.2, "answered after %.3fs, before the 200 ms queue delay" % first_done
    assert first_done < 4.0


# --- 3. no dynamic batching

def test_without_dynamic_batching_each_request_runs_alone(bat, rng):
    m, n = "bt_nodyn", 12
    snap = Snap(bat.client, m)
    feeds = [lib.random_inputs(bat.specs[m], rng, 1) for _ in range(n)]
    calls = Calls(bat.client)
    for i, f in enumerate(feeds):
        calls.send(i, m, f)
    calls.wait(range(n))
    for i, f in enumerate(feeds):
        _check(bat, m, calls.ok(i), f, "request %d" % i)
    d = snap.settle(n)
    assert d.table == {1: n}, d
    assert (d.executions, d.inferences, d.success) == (n, n, n), d


# --- 4. multi-row requests

def test_rows_add_up_to_preferred(bat, rng):
    """preferred [5]: a 2-row and a 3-row request form one batch of 5; each gets its own rows back."""
    m = "bt_pref5"
    snap = Snap(bat.client, m)
    feeds = [lib.random_inputs(bat.specs[m], rng, 2), lib.random_inputs(bat.specs[m], rng, 3)]
    calls = Calls(bat.client)
    t0 = time.monotonic()
    for i, f in enumerate(feeds):
        calls.send(i, m, f)
    calls.wait([0, 1])
    assert time.monotonic() - t0 < 4.0
    for i, f in enumerate(feeds):
        got = calls.ok(i)
        assert got["V_Y"].shape == (f["V_X"].shape[0], 4)
        _check(bat, m, got, f, "request %d" % i)
    d = snap.settle(5)
    assert d.table == {5: 1}, d
    assert (d.executions, d.inferences, d.success) == (1, 5, 2), d


# --- 5. shapes

@pytest.mark.parametrize("lengths,table", [
    ([2, 2, 3, 3, 3], {2: 1, 3: 1}),       # same-shape neighbours share, the shape change splits
    ([2, 3, 2, 3], {1: 4}),                # alternating shapes: nobody shares
])
@holder_retry
def test_different_shapes_never_share_a_batch(bat, rng, lengths, table):
    """bt_slow (dims [-1, 512], max 8, no delay, one instance): requests queued in a known order behind
    a running one; the batcher scans FIFO and stops at a shape change."""
    m = "bt_slow"
    snap = Snap(bat.client, m)
    calls = Calls(bat.client)
    a = slow_feeds(rng, L=hold_L())
    qs = [slow_feeds(rng, L=L) for L in lengths]
    calls.send("A", m, a)
    await_pending(bat.srv, m, 1)
    for i, f in enumerate(qs):
        calls.send(i, m, f)
        await_pending(bat.srv, m, 2 + i, holder=(calls, "A"))  # fixes the queue order
    holder_still_running(calls, "A", m)
    calls.wait(["A"] + list(range(len(qs))))
    _check(bat, m, calls.ok("A"), a, "A")
    for i, f in enumerate(qs):
        _check(bat, m, calls.ok(i), f, "queued %d (L=%d)" % (i, lengths[i]))
    d = snap.settle(1 + len(qs))
    want = dict(table)
    want[1] = want.get(1, 0) + 1  # A
    assert d.table == want, d
    assert (d.executions, d.inferences, d.success) == (sum(want.values()), 1 + len(qs), 1 + len(qs)), d


# --- 6. priorities

@holder_retry
def test_high_priority_overtakes(bat, rng, stream_calls):
    """priority_levels 2, default 2, max 1, one instance: A runs; B1, B2 (default level) then H
    (priority 1) queue; H runs before B1 and B2, which keep their order. Sent on one stream, whose
    answers leave in the order the executions finished."""
    m = "bt_slow_prio"
    snap = Snap(bat.client, m)
    calls = stream_calls
    feeds = {"A": slow_feeds(rng, L=hold_L()), "B1": slow_feeds(rng), "B2": slow_feeds(rng), "H": slow_feeds(rng)}
    calls.send("A", m, feeds["A"])
    await_pending(bat.srv, m, 1)
    calls.send("B1", m, feeds["B1"])
    await_pending(bat.srv, m, 2, holder=(calls, "A"))
    calls.send("B2", m, feeds["B2"], priority=2)
    await_pending(bat.srv, m, 3, holder=(calls, "A"))
    calls.send("H", m, feeds["H"], priority=1)
    await_pending(bat.srv, m, 4, holder=(calls, "A"))
    holder_still_running(calls, "A", m)
    calls.wait(list(feeds))
    for k, f in feeds.items():
        _check(bat, m, calls.ok(k), f, k)
    assert calls.order == ["A", "H", "B1", "B2"], calls.order
    d = snap.settle(4)
    assert d.table == {1: 4} and d.executions == 4, d


def test_priority_out_of_range(bat, rng):
    m = "bt_slow_prio"
    snap = Snap(bat.client, m)
    for p in (3, 1000):
        with pytest.raises(InferenceServerException) as ei:
            bat.client.infer(m, lib.triton_inputs(slow_feeds(rng)), priority=p)
        assert lib.status_name(ei.value) == "INVALID_ARGUMENT", lib.error_message(ei.value)
    d = snap.settle_failures(2)
    assert d.executions == 0 and d.fail == 2, d


# --- 7. queue size

@holder_retry
def test_full_queue_rejects_at_once(bat, rng, stream_calls):
    """max_queue_size 2: A runs, 2 queue, the next gets RESOURCE_EXHAUSTED while A still runs."""
    m = "bt_slow_full"
    snap = Snap(bat.client, m)
    calls = stream_calls
    feeds = {"A": slow_feeds(rng, L=hold_L()), "Q1": slow_feeds(rng), "Q2": slow_feeds(rng)}
    calls.send("A", m, feeds["A"])
    await_pending(bat.srv, m, 1)
    calls.send("Q1", m, feeds["Q1"])
    calls.send("Q2", m, feeds["Q2"])
    await_pending(bat.srv, m, 3, holder=(calls, "A"))
    holder_still_running(calls, "A", m)
    with pytest.raises(InferenceServerException) as ei:
        bat.client.infer(m, lib.triton_inputs(slow_feeds(rng)), client_timeout=WAIT_S)
    assert lib.status_name(ei.value) == "RESOURCE_EXHAUSTED", lib.error_message(ei.value)
    # A rejection that waited for A would come after A's answer; one that came at once finds A still
    # running unless this machine was too slow to tell (then the test runs again, A costlier).
    holder_still_running(calls, "A", m)
    calls.wait(list(feeds))
    for k, f in feeds.items():
        _check(bat, m, calls.ok(k), f, k)
    assert calls.order == ["A", "Q1", "Q2"], calls.order
    d = snap.settle(3)
    assert d.table == {1: 3} and (d.executions, d.success, d.fail) == (3, 3, 1), d


# --- 8. queue timeouts

@pytest.mark.parametrize("model,req_timeout_us,expect", [
    ("bt_slow_reject", None, "UNAVAILABLE"),         # default 100 ms, REJECT
    ("bt_slow_reject", 60000000, "UNAVAILABLE"),     # no override allowed: the request's timeout is ignored
    ("bt_slow_delayact", None, "OK"),                # default 100 ms, DELAY: answered after A
    ("bt_slow_override", 100000, "UNAVAILABLE"),     # default 60 s, override allowed: 100 ms applies
    ("bt_slow_override", None, "OK"),                # ... and without one the 60 s default does
    ("bt_slow_nooverride", 100000, "OK"),            # default 60 s, override not allowed: 100 ms ignored
])
@holder_retry
def test_queue_timeout(bat, rng, model, req_timeout_us, expect):
    snap = Snap(bat.client, model)
    calls = Calls(bat.client)
    a, q = slow_feeds(rng, L=hold_L()), slow_feeds(rng)
    calls.send("A", model, a)
    await_pending(bat.srv, model, 1)
    t_q = time.monotonic()
    kw = {"timeout": req_timeout_us} if req_timeout_us is not None else {}
    calls.send("Q", model, q, **kw)
    calls.wait(["A", "Q"])
    # the 100 ms timeouts are only observable while A still runs: A must outlast Q's queueing by far
    if calls.t_done["A"] - t_q < 0.3:
        raise HolderTooShort(model)
    _check(bat, model, calls.ok("A"), a, "A")
    if expect == "OK":
        _check(bat, model, calls.ok("Q"), q, "Q")
        # One instance and two executions of one row: Q ran after A. (Which answer the client sees
        # first is not the server's to decide for two unary calls: A's is 2 MB, Q's a few KB.)
        d = snap.settle(2)
        assert d.table == {1: 2} and (d.success, d.fail) == (2, 0), d
    else:
        code, msg = calls.error("Q")
        assert code == expect, (code, msg)
        assert "Request timeout expired" in msg, msg
        assert calls.order == ["Q", "A"], "the timeout fired only after the running request: %s" % calls.order
        d = snap.settle(1)
        assert d.table == {1: 1} and (d.executions, d.inferences, d.success, d.fail) == (1, 1, 1, 1), d


# --- 9. cancellation and client deadlines

def _raw_request(pb, model, feeds):
    req = pb.service.ModelInferRequest(model_name=model)
    for name, arr in feeds.items():
        req.inputs.add(name=name, datatype=lib.np_to_wire(arr.dtype), shape=list(arr.shape))
        req.raw_input_contents.append(arr.tobytes())
    return req


def test_cancelled_while_queued_never_executes(bat, rng, pb):
    m = "bt_slow"
    snap = Snap(bat.client, m)
    calls = Calls(bat.client)
    a = slow_feeds(rng, L=SLOW_L)
    calls.send("A", m, a)
    await_pending(bat.srv, m, 1)
    with grpc.insecure_channel(bat.srv.grpc_url) as ch:
        stub = pb.grpc.GRPCInferenceServiceStub(ch)
        fut = stub.ModelInfer.future(_raw_request(pb, m, slow_feeds(rng)))
        await_pending(bat.srv, m, 2)
        assert fut.cancel()
        with pytest.raises(grpc.FutureCancelledError):
            fut.result(timeout=WAIT_S)
        calls.wait(["A"])
        _check(bat, m, calls.ok("A"), a, "A")
        await_pending(bat.srv, m, 0)
        d = snap.settle_failures(1)
    assert d.table == {1: 1}, d
    assert (d.executions, d.inferences, d.success, d.fail) == (1, 1, 1, 1), d
    # Still serving.
    f = slow_feeds(rng)
    _, got = lib.infer(bat.client, m, f)
    _check(bat, m, got, f, "after the cancellation")


@holder_retry
def test_client_deadline_while_queued(bat, rng):
    m = "bt_slow"
    snap = Snap(bat.client, m)
    calls = Calls(bat.client)
    a = slow_feeds(rng, L=hold_L())
    calls.send("A", m, a)
    await_pending(bat.srv, m, 1)
    t_q = time.monotonic()
    calls.send("Q", m, slow_feeds(rng), client_timeout=0.15)
    calls.wait(["A", "Q"])
    # Q's 150 ms deadline passes in the queue only while A still runs: A must outlast it by far (CI's run
    # of f837b30 on a machine whose load fell after the calibration: Q served in time, behind a short A)
    if calls.t_done["A"] - t_q < 0.3:
        raise HolderTooShort(m)
    code, msg = calls.error("Q")
    assert code == "DEADLINE_EXCEEDED", (code, msg)
    _check(bat, m, calls.ok("A"), a, "A")
    await_pending(bat.srv, m, 0)
    d = snap.settle_failures(1)
    assert d.table == {1: 1}, d
    assert (d.executions, d.inferences, d.success, d.fail) == (1, 1, 1, 1), d


# --- 10. preserve_ordering
#
# What the server guarantees is the order in which it SENDS answers. Separate unary calls on one
# connection are multiplexed: a large answer sent first may still reach the client after a small one
# sent right behind it (HTTP/2 flow control), and the client's callbacks may run in either order.
# One ModelStreamInfer stream carries answers in exactly the order the server sent them, and its
# requests reach the scheduler in the order they were written, so these tests observe ordering on a
# stream, where the observation is the guarantee itself.

@pytest.mark.parametrize("model,order", [("bt_order", ["heavy", "light"]), ("bt_noorder", ["light", "heavy"])])
def test_preserve_ordering_two_instances(bat, rng, stream_calls, model, order):
    """Two instances: a heavy request, then a light one that runs on the other instance and finishes
    first. With preserve_ordering its answer is held until the heavy one's is sent; without it, the
    light answer leaves first (the control: the heavy one runs ~SLOW_TARGET_S, the light one ms)."""
    snap = Snap(bat.client, model)
    feeds = {"heavy": slow_feeds(rng, L=SLOW_L), "light": slow_feeds(rng, L=1)}
    stream_calls.send("heavy", model, feeds["heavy"])
    await_pending(bat.srv, model, 1)  # running on one instance before the light one arrives
    stream_calls.send("light", model, feeds["light"])
    stream_calls.wait(list(feeds))
    for k, f in feeds.items():
        _check(bat, model, stream_calls.ok(k), f, k)
    assert stream_calls.order == order, stream_calls.order
    d = snap.settle(2)
    assert d.table == {1: 2} and d.executions == 2, d


def test_preserve_ordering_pipelined(bat, rng, stream_calls):
    """50 pipelined requests of mixed cost (L in 1..128, 1-2 rows: batches of very different run
    times on two instances) on one stream: answers are sent in exactly the order the requests came.
    Two heavy requests first hold both instances so the rest queue and form batches of different
    sizes whose executions finish out of order."""
    m, n = "bt_order", 48
    snap = Snap(bat.client, m)
    Ls = [int(x) for x in rng.choice([1, 8, 32, 128], size=n)]
    rows = [int(x) for x in rng.integers(1, 3, size=n)]
    feeds = [slow_feeds(rng, rows=r, L=L) for r, L in zip(rows, Ls)]
    b_rows = max(2, min(8, (32 << 20) // (SLOW_L * 512 * 4)))
    blockers = {"B0": slow_feeds(rng, rows=b_rows, L=SLOW_L), "B1": slow_feeds(rng, rows=b_rows, L=SLOW_L)}
    want = [bat.oracle.run(m, f) for f in feeds]
    keys = list(blockers) + [str(i) for i in range(n)]
    for k, f in blockers.items():
        stream_calls.send(k, m, f)
    for i, f in enumerate(feeds):
        stream_calls.send(i, m, f)
    stream_calls.wait(keys, timeout=120)
    for k, f in blockers.items():
        _check(bat, m, stream_calls.ok(k), f, k)
    for i in range(n):
        lib.check_outputs(stream_calls.ok(i), want[i], bat.specs[m], what="request %d (L=%d)" % (i, Ls[i]))
    assert stream_calls.order == keys, "answers left out of request order: %s" % stream_calls.order
    total = 2 * b_rows + sum(rows)
    d = snap.settle(total)
    assert (d.inferences, d.success, d.fail) == (total, n + 2, 0), d
    print("preserve_ordering pipelined: %d requests in %d executions %s" % (n + 2, d.executions, d.table))


# --- 11. many clients

CLIENTS, PER_CLIENT = 256, 20


def _many_clients(url, model, spec, oracle, rng):
    pool = []
    for _ in range(32):
        f = lib.random_inputs(spec, rng, 1)
        pool.append((f, oracle.run(model, f)))
    barrier = threading.Barrier(CLIENTS)

    def worker(ci):
        c = grpcclient.InferenceServerClient(url=url)
        try:
            barrier.wait(WAIT_S)
            for r in range(PER_CLIENT):
                feeds, want = pool[(ci * 7 + r) % len(pool)]
                _, got = lib.infer(c, model, feeds)
                lib.check_outputs(got, want, spec, what="client %d request %d" % (ci, r))
        finally:
            c.close()
    with cf.ThreadPoolExecutor(CLIENTS) as ex:
        futs = [ex.submit(worker, i) for i in range(CLIENTS)]
        done, not_done = cf.wait(futs, timeout=300)
        assert not not_done, "%d clients unfinished" % len(not_done)
        for f in futs:
            f.result()


def test_256_clients_mlp_batches(server, client, specs, oracle, rng):
    """The seed mlp (dynamic_batching {}, max 64) under 256 concurrent clients: every answer right,
    fewer executions than requests."""
    n = CLIENTS * PER_CLIENT
    snap = Snap(client, "mlp")
    t0 = time.monotonic()
    _many_clients(server.grpc_url, "mlp", specs["mlp"], oracle, rng)
    el = time.monotonic() - t0
    d = snap.settle(n)
    assert (d.inferences, d.success, d.fail) == (n, n, 0), d
    assert sum(d.table.values()) == d.executions and sum(k * v for k, v in d.table.items()) == n, d
    assert d.executions < n, "no batching happened: %r" % d
    assert max(d.table) <= 64
    print("\nmlp, %d clients x %d requests in %.1fs: %d executions (mean batch %.2f)"
          % (CLIENTS, PER_CLIENT, el, d.executions, n / d.executions))
    print("batch size  executions")
    for k in sorted(d.table):
        print("%10d  %10d" % (k, d.table[k]))


def test_256_clients_mlp_without_dynamic_batching(bat, rng):
    n = CLIENTS * PER_CLIENT
    m = "bt_mlp_nodyn"
    snap = Snap(bat.client, m)
    t0 = time.monotonic()
    _many_clients(bat.srv.grpc_url, m, bat.specs[m], bat.oracle, rng)
    el = time.monotonic() - t0
    d = snap.settle(n)
    assert d.table == {1: n}, d
    assert (d.executions, d.inferences, d.success, d.fail) == (n, n, n, 0), d
    print("\nbt_mlp_nodyn, %d clients x %d requests in %.1fs: %d executions" % (CLIENTS, PER_CLIENT, el, n))


@pytest.mark.parametrize("threads", ["0", "1"])
def test_reply_threads(repo_dir, specs, oracle, rng, threads):
    """--reply-threads 0 (each batch answered by the instance thread that ran it, as before the reply
    queue) and 1 (one thread sends every batch's answers): the 256 clients' answers all right and
    counted, batches formed. The default (several threads) is what every other test here runs."""
    gen = lib.served(repo_dir, ["--reply-threads", threads])
    srv = next(gen)
    try:
        c = grpcclient.InferenceServerClient(url=srv.grpc_url)
        n = CLIENTS * PER_CLIENT
        snap = Snap(c, "mlp")
        _many_clients(srv.grpc_url, "mlp", specs["mlp"], oracle, rng)
        d = snap.settle(n)
        assert (d.inferences, d.success, d.fail) == (n, n, 0), d
        assert d.executions < n, "no batching happened: %r" % d
        c.close()
    finally:
        next(gen, None)  # stops the server and checks its clean exit
