"""Shared helpers for inferd's integration suite: the server process (and the bodies of server,
repository and client fixtures), the onnxruntime oracle, random inputs drawn from the generator's
spec, tensor comparison, plain HTTP requests, metric scraping and parsing, model statistics.

Kept out of conftest.py so test modules can import plain functions; fixtures live in conftest.py.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import numpy as np

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "models"))
import gen_models  # noqa: E402  (the generator is the single source of the models' spec)

READY_RE = re.compile(r"inferd ready: grpc=(\d+) http=(\d+)(?: metrics=(\d+))?")
# Lines that mean a sanitizer found something; the suite runs unchanged against ASan/UBSan/TSan builds.
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer")

NP_OF_WIRE = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64, "INT32": np.int32, "FP64": np.float64}

START_TIMEOUT_S = float(os.environ.get("INFERD_START_TIMEOUT", "90"))
STOP_TIMEOUT_S = float(os.environ.get("INFERD_STOP_TIMEOUT", "60"))


def inferd_bin():
    return os.environ.get("INFERD_BIN", os.path.join(REPO_ROOT, "build", "bin", "inferd"))


def _binary_holds(marker, binary):
    try:
        with open(binary or inferd_bin(), "rb") as f:
            return marker in f.read()
    except OSError:
        return False


def address_sanitized(binary=None):
    """True when the inferd binary carries AddressSanitizer's runtime (the asan preset's build)."""
    return _binary_holds(b"__asan_init", binary)


def thread_sanitized(binary=None):
    """True when the inferd binary carries ThreadSanitizer's runtime (the tsan preset's build)."""
    return _binary_holds(b"__tsan_init", binary)


def headless_chromium():
    """(chromium, chromedriver) for the tests that open a page in headless Chromium through selenium. Where
    either is missing the test skips, saying what to install, unless INFERD_REQUIRE_BROWSER=1 (tests/run.sh, so
    CI, sets it: deploy/install-deps.sh installs them there), where it fails instead: CI must never pass a
    browser check by skipping it."""
    import shutil
    import pytest
    missing = []
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip install -r tests/requirements.txt)")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        missing.append("chromium / chromedriver (apt-get install chromium chromium-driver)")
    if missing:
        why = "headless Chromium check: %s not installed" % " and ".join(missing)
        if os.environ.get("INFERD_REQUIRE_BROWSER") == "1":
            pytest.fail(why + ", and INFERD_REQUIRE_BROWSER=1 (CI) requires it")
        pytest.skip(why + " (CI installs them)")
    return chromium, driver


def gpu_skip_reason():
    """None where a GPU is visible (or INFERD_TEST_GPU=1 says to run anyway), else why GPU tests cannot run
    here (INFERD_TEST_GPU=0 skips them anyway)."""
    import glob
    import shutil
    force = os.environ.get("INFERD_TEST_GPU")
    if force == "0":
        return "INFERD_TEST_GPU=0"
    if force == "1":
        return None
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip() in ("", "-1"):
        return "no GPU visible: CUDA_VISIBLE_DEVICES=%r hides every device" % cvd
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None if glob.glob("/dev/nvidia[0-9]*") else \
            "no GPU visible: no nvidia-smi and no /dev/nvidiaN (INFERD_TEST_GPU=1 runs these tests anyway)"
    try:
        p = subprocess.run([smi, "-L"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return "no GPU visible: nvidia-smi -L failed: %s" % e
    if p.returncode != 0 or not re.search(r"^GPU \d+", p.stdout, re.M):
        return "no GPU visible: nvidia-smi -L listed none"
    return None


# --- the server process

class ServerProcess:
    """One inferd process on ports it picked itself (--grpc-port 0 --http-port 0).

    stderr is drained by a thread for the process's whole life, so a chatty server never
    blocks on a full pipe, and every line is kept for the sanitizer check at the end.
    """

    def __init__(self, repo_dir, extra_args=(), binary=None, env=None):
        """env: extra environment variables for the server, on top of this process's environment."""
        self.binary = binary or inferd_bin()
        self.env = None if env is None else dict(os.environ, **env)
        self.args = [self.binary, "--model-repository", repo_dir, "--grpc-port", "0", "--http-port", "0",
                     "--log-level", "info"] + list(extra_args)
        self.lines = []
        self._lock = threading.Lock()
        self._grew = threading.Condition(self._lock)  # notified at every stderr line read
        self._ready = threading.Event()
        self.grpc_port = self.http_port = self.metrics_port = None
        self.proc = None
        self.returncode = None

    def start(self):
        if not os.access(self.binary, os.X_OK):
            raise RuntimeError("inferd binary not found or not executable: %s (set INFERD_BIN)" % self.binary)
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace", env=self.env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(START_TIMEOUT_S) or self.grpc_port is None:
            rc = self.proc.poll()
            if rc is None:
                self.proc.kill()
                self.proc.wait()
            raise RuntimeError("inferd did not print 'inferd ready: grpc=<p> http=<p>' within %.0fs "
                               "(exit code %s). stderr tail:\n%s" % (START_TIMEOUT_S, rc, self.stderr_tail()))
        return self

    def _read(self):
        for line in self.proc.stderr:
            with self._lock:
                self.lines.append(line.rstrip("\n"))
                self._grew.notify_all()
            m = READY_RE.search(line)
            if m and not self._ready.is_set():
                self.grpc_port, self.http_port = int(m.group(1)), int(m.group(2))
                self.metrics_port = int(m.group(3)) if m.group(3) else None
                self._ready.set()
        self._ready.set()  # EOF: wake start() so it reports the death instead of waiting out the timeout

    @property
    def grpc_url(self):
        return "127.0.0.1:%d" % self.grpc_port

    @property
    def http_url(self):
        return "http://127.0.0.1:%d" % self.http_port

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT_S):
        """Sends sig (if still running) and waits; returns the exit code. Kills only on timeout."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait_exit(timeout)

    def wait_exit(self, timeout=STOP_TIMEOUT_S):
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.returncode = "timeout"
        self._reader.join(10)
        return self.returncode

    def stderr_text(self):
        with self._lock:
            return "\n".join(self.lines)

    def await_stderr(self, pred, timeout=10.0):
        """Waits until pred(list of stderr lines so far) is true: the server wrote it, but the reader
        thread may not have taken it from the pipe yet. Returns the lines; fails on timeout."""
        with self._grew:
            if not self._grew.wait_for(lambda: pred(self.lines), timeout):
                raise AssertionError("stderr never satisfied the condition within %.0fs; tail:\n%s"
                                     % (timeout, "\n".join(self.lines[-20:])))
            return list(self.lines)

    def stderr_tail(self, n=60):
        with self._lock:
            return "\n".join(self.lines[-n:])

    def sanitizer_lines(self):
        with self._lock:
            return [l for l in self.lines if any(m in l for m in SANITIZER_MARKERS)]

    def assert_clean_exit(self):
        """The teardown contract: exit code 0 after SIGTERM and no sanitizer report on stderr."""
        rc = self.returncode
        bad = self.sanitizer_lines()
        assert rc == 0 and not bad, ("inferd exit code %r (want 0), sanitizer lines: %r\nstderr tail:\n%s"
                                     % (rc, bad, self.stderr_tail()))


def served(repo_dir, extra_args=(), **kw):
    """The body of a server fixture (`yield from lib.served(...)`): starts a server, failing the test
    that needs it when it cannot start, yields it, then stops it and asserts the teardown contract."""
    import pytest
    srv = ServerProcess(repo_dir, extra_args, **kw)
    try:
        srv.start()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    yield srv
    srv.stop()
    srv.assert_clean_exit()


def start_fails(repo_dir, args):
    """Asserts a server started with args fails its start and exits non-zero without a sanitizer report;
    returns its stderr, for the test to check what it names."""
    import pytest
    srv = ServerProcess(repo_dir, args)
    with pytest.raises(RuntimeError):
        srv.start()
    rc = srv.wait_exit()
    assert rc not in (0, "timeout"), rc
    assert not srv.sanitizer_lines(), srv.stderr_tail()
    return srv.stderr_text()


def generated_repo(tmp_path_factory, name, adders):
    """The body of a module's repository fixture: a fresh folder `name` holding the generator's models
    that each of adders (gen_models.add_mlp, add_batching, ...) adds; returns (dir, {model: spec})."""
    d = str(tmp_path_factory.mktemp(name))
    repo = gen_models.Repo(d)
    for add in adders:
        add(repo)
    return d, repo.specs


def grpc_client(srv):
    """The body of a tritonclient gRPC client fixture (`yield from lib.grpc_client(srv)`): a client on
    srv's gRPC port, closed after the tests that use it."""
    import tritonclient.grpc as grpcclient
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    yield c
    c.close()


# --- HTTP

def rest_error(body):
    """The message of a KServe v2 REST error body: exactly {"error": "<non-empty text>"}."""
    j = json.loads(body)
    assert list(j) == ["error"], j
    assert isinstance(j["error"], str) and j["error"], j
    return j["error"]


def http_infer_inputs(feeds, binary):
    """tritonclient.http InferInputs for {name: array}, as JSON or with the binary tensor extension."""
    import tritonclient.http as httpclient
    out = []
    for name, arr in feeds.items():
        x = httpclient.InferInput(name, list(arr.shape), np_to_wire(arr.dtype))
        x.set_data_from_numpy(arr, binary_data=binary)
        out.append(x)
    return out


def http_request(conn, method, path, body=None, headers=None):
    """(status, headers, body bytes) of one request on an http.client connection, which it closes."""
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def http_call(srv, method, path, body=None, headers=None, timeout=30):
    """(status, headers, body bytes) of one request to srv's HTTP port on a fresh plain http.client
    connection (http_request)."""
    import http.client
    import urllib.parse
    u = urllib.parse.urlparse(srv.http_url)
    return http_request(http.client.HTTPConnection(u.hostname, u.port, timeout=timeout), method, path, body,
                        headers)


def read_to_eof(sock, bufsize=65536):
    """All that sock receives until the peer ends the connection."""
    got = b""
    while True:
        chunk = sock.recv(bufsize)
        if not chunk:
            return got
        got += chunk


def http_get(url, timeout=10):
    """Returns (status, body text); 4xx/5xx are returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


_METRIC_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)')
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Prometheus text -> list of (name, {label: value}, float). Comment lines are skipped."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _METRIC_RE.match(line)
        assert m, "unparseable metrics line: %r" % line
        labels = dict(_LABEL_RE.findall(m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def metric_sum(samples, name, **labels):
    """Sum of every sample of `name` whose labels include `labels` (so reasons are summed over)."""
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == str(x) for k, x in labels.items()))


def metric_present(samples, name, **labels):
    return any(n == name and all(l.get(k) == str(x) for k, x in labels.items()) for n, l, _ in samples)


def scrape_metrics(srv):
    """srv's /metrics (over its HTTP port) parsed by parse_metrics; asserts it answered 200."""
    status, text = http_get(srv.http_url + "/metrics")
    assert status == 200, text[:500]
    return parse_metrics(text)


def model_stats(client, model, version="1"):
    """The one ModelStatistics of model's version from a tritonclient gRPC client."""
    resp = client.get_inference_statistics(model, version)
    ms = [m for m in resp.model_stats if m.name == model and m.version == version]
    assert len(ms) == 1, "statistics for %s v%s: %s" % (model, version, resp)
    return ms[0]


# --- inputs and the oracle

def seed_from_env():
    s = os.environ.get("INFERD_TEST_SEED")
    return int(s) if s else int.from_bytes(os.urandom(4), "little")


def random_inputs(spec, rng, batch=1):
    """Fresh random inputs for every input of the model; batch is ignored for max_batch_size 0."""
    feeds = {}
    for i in spec["inputs"]:
        shape = ([batch] if spec["max_batch_size"] > 0 else []) + list(i["dims"])
        dt = NP_OF_WIRE[i["datatype"]]
        if np.issubdtype(dt, np.integer):
            feeds[i["name"]] = rng.integers(int(i["low"]), int(i["high"]) + 1, size=shape).astype(dt)
        else:
            feeds[i["name"]] = rng.uniform(i["low"], i["high"], size=shape).astype(dt)
    return feeds


class Oracle:
    """onnxruntime sessions on the very files the server loads, one per (model, version)."""

    def __init__(self, repo_dir, specs):
        import onnxruntime as ort
        self._ort = ort
        self.repo_dir, self.specs = repo_dir, specs
        self._sessions = {}
        self._lock = threading.Lock()

    def session(self, model, version=None):
        spec = self.specs[model]
        v = int(version) if version not in (None, "") else spec["default_version"]
        key = (model, v)
        with self._lock:
            if key not in self._sessions:
                path = os.path.join(self.repo_dir, model, str(v), spec["filename"])
                so = self._ort.SessionOptions()
                so.intra_op_num_threads = 1
                self._sessions[key] = self._ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            return self._sessions[key]

    def run(self, model, feeds, version=None):
        """Returns {output name: array} for every output of the model (InferenceSession.run is thread-safe)."""
        sess = self.session(model, version)
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(names, feeds)))


def assert_close(actual, expected, rtol=1e-5, what=""):
    """Compares a server output with onnxruntime's.

    Exact for integers. For floats: |a - e| <= rtol*|e| + rtol*max|e|, i.e. relative error rtol
    measured against the tensor's scale. Why the second term: the server (OpenBLAS, its own kernels)
    and onnxruntime (MLAS) sum in different orders; measured on the 1024-512-10 MLP that gives
    ~7e-7 error relative to max|y| but unbounded element-wise relative error where a sum of
    mixed-sign terms lands near zero (2e-2 seen). rtol=1e-5 (1e-3 for FP16 I/O) is ~10x the
    measured normwise difference, and far below what a wrong kernel produces.
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, "%s: shape %s, expected %s" % (what, actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, "%s: dtype %s, expected %s" % (what, actual.dtype, expected.dtype)
    if np.issubdtype(expected.dtype, np.integer) or expected.dtype == np.bool_:
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    e64 = expected.astype(np.float64)
    scale = float(np.max(np.abs(e64))) if e64.size else 0.0
    np.testing.assert_allclose(actual.astype(np.float64), e64, rtol=rtol, atol=rtol * max(scale, 1e-30),
                               err_msg=what)


# --- clients

def status_name(exc):
    """'INVALID_ARGUMENT' from a tritonclient InferenceServerException or a grpc.RpcError."""
    if hasattr(exc, "code") and callable(exc.code):
        return exc.code().name
    s = exc.status() if callable(getattr(exc, "status", None)) else str(exc)
    return str(s).replace("StatusCode.", "")


def error_message(exc):
    if hasattr(exc, "details") and callable(exc.details):
        return exc.details() or ""
    return exc.message() if callable(getattr(exc, "message", None)) else str(exc)


def triton_inputs(feeds, datatypes=None):
    import tritonclient.grpc as grpcclient
    out = []
    for name, arr in feeds.items():
        dt = (datatypes or {}).get(name) or np_to_wire(arr.dtype)
        x = grpcclient.InferInput(name, list(arr.shape), dt)
        x.set_data_from_numpy(arr)
        out.append(x)
    return out


def np_to_wire(dtype):
    for k, v in NP_OF_WIRE.items():
        if np.dtype(v) == np.dtype(dtype):
            return k
    raise ValueError(dtype)


def infer(client, model, feeds, version="", outputs=None, request_id=""):
    """tritonclient infer; returns (InferResult, {output name: array} for every returned output)."""
    import tritonclient.grpc as grpcclient
    req_outs = [grpcclient.InferRequestedOutput(o) for o in outputs] if outputs else None
    res = client.infer(model, triton_inputs(feeds), model_version=version, outputs=req_outs, request_id=request_id)
    resp = res.get_response()
    return res, {o.name: res.as_numpy(o.name) for o in resp.outputs}


def check_outputs(got, want, spec, names=None, what=""):
    names = names if names is not None else [o["name"] for o in spec["outputs"]]
    assert sorted(got) == sorted(names), "%s: outputs %s, expected %s" % (what, sorted(got), sorted(names))
    for n in names:
        assert_close(got[n], want[n], spec["rtol"], what="%s %s" % (what, n))


def decode_response_outputs(resp):
    """Raw-grpc ModelInferResponse -> {name: array}; handles raw_output_contents and typed contents."""
    out = {}
    typed_field = {"FP32": "fp32_contents", "INT64": "int64_contents", "INT32": "int_contents",
                   "FP64": "fp64_contents"}
    for i, o in enumerate(resp.outputs):
        dt = NP_OF_WIRE[o.datatype]
        if len(resp.raw_output_contents) > 0:
            arr = np.frombuffer(resp.raw_output_contents[i], dtype=dt).reshape(list(o.shape))
        else:
            arr = np.array(getattr(o.contents, typed_field[o.datatype]), dtype=dt).reshape(list(o.shape))
        out[o.name] = arr
    return out


def require_ready(srv, client, name):
    """Fails the test (with the server's load errors for it) unless model name is ready."""
    import pytest  # imported here: tests/models/zoo/check_families.py uses this module without pytest
    if not client.is_model_ready(name):
        reason = [line for line in srv.lines if name in line and ("fail" in line or "error" in line.lower())]
        pytest.fail("%s did not load: %s" % (name, reason[-3:]), pytrace=False)


def ort_session(cache, path, threads=2):
    """An onnxruntime CPU session of the model file at path, made once per cache (a dict)."""
    import onnxruntime as ort
    if path not in cache:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        cache[path] = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return cache[path]
