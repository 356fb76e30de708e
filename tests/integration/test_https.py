"""HTTPS and mutual TLS on the HTTP port (issue 15), against the real server with certificates made by the
`openssl` CLI (tls_certs.make_certs).

HTTPS: curl --cacert and tritonclient.http with ssl=True answer health, metadata and inference (JSON and
binary tensors) with values checked against onnxruntime; TLS 1.2 is the minimum and ALPN says http/1.1;
a plain HTTP request to the port gets a plain 400 that says to use https://; garbage, a stalled or trickled
handshake are closed without hurting other connections; the header and body limits hold after decryption;
the server ends a closing connection with close_notify; 32 threads x 20 requests, keep-alive and one
handshake per request, are all answered with the right values. Mutual TLS: no client certificate, or one
another CA signed, is refused; the right one works. Wrong flags fail the start naming them (wrong
certificate files: test_tls.py, on both ports)."""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time

import numpy as np
import pytest
import tritonclient.http as httpclient

import inferd_testlib as lib
import tls_certs

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None or shutil.which("curl") is None,
                                reason="the openssl and curl CLIs are needed")

TIMEOUT_S = 20
HANDSHAKE_S = 10  # SRV_HTTP_TLS_HANDSHAKE_MS


def _https_args(certs, mutual=False):  # the certificates: conftest's certs fixture
    return tls_certs.server_args(certs, "http", mutual, bare=True)


@pytest.fixture(scope="module")
def https_server(repo_dir, certs):
    yield from lib.served(repo_dir, _https_args(certs))


@pytest.fixture(scope="module")
def mtls_server(repo_dir, certs):
    yield from lib.served(repo_dir, _https_args(certs, mutual=True))


def _url(server, path, host="127.0.0.1"):
    return "https://%s:%d%s" % (host, server.http_port, path)


def _curl(*args):
    """(exit code, stdout, stderr) of curl with a timeout; -w appends the status code on its own line."""
    r = subprocess.run(["curl", "-sS", "--max-time", str(TIMEOUT_S), "-w", "\n%{http_code}"] + list(args),
                       capture_output=True, timeout=TIMEOUT_S + 10)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def _curl_ok(*args):
    rc, out, err = _curl(*args)
    assert rc == 0, err
    body, _, code = out.rpartition(b"\n")
    return int(code), body


def _context(certs, client=None):
    ctx = ssl.create_default_context(cafile=certs["ca"])
    if client:
        ctx.load_cert_chain(certs[client + "_crt"], certs[client + "_key"])
    return ctx


def _request(server, certs, method, path, body=None, headers=None, client=None):
    """(status, headers, body) over a fresh HTTPS connection (http.client)."""
    conn = http.client.HTTPSConnection("127.0.0.1", server.http_port, timeout=TIMEOUT_S,
                                       context=_context(certs, client))
    return lib.http_request(conn, method, path, body, headers)


def _mlp_json_body(x):
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()


def _check_mlp_json(raw, x, oracle, specs, what):
    res = json.loads(raw)
    out = res["outputs"][0]
    assert out["name"] == "OUTPUT0" and out["shape"] == [x.shape[0], 10], res
    got = np.array(out["data"], np.float32).reshape(out["shape"])
    lib.assert_close(got, oracle.run("mlp", {"INPUT0": x})["OUTPUT0"], specs["mlp"]["rtol"], what=what)


def _closed_by_server(sock, timeout):
    """True when the server closes sock (EOF or reset) within timeout, reading and dropping what it sends."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(4096):
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
    return False


# --- HTTPS through curl

def test_curl_health_and_metadata(https_server, certs):
    code, body = _curl_ok("--cacert", certs["ca"], _url(https_server, "/v2/health/ready"))
    assert code == 200 and body == b""
    # the certificate's SAN names localhost too
    code, body = _curl_ok("--cacert", certs["ca"], _url(https_server, "/v2", host="localhost"))
    assert code == 200 and json.loads(body)["name"] == "inferd", body
    code, body = _curl_ok("--cacert", certs["ca"], _url(https_server, "/v2/models/mlp"))
    md = json.loads(body)
    assert code == 200 and md["name"] == "mlp" and md["inputs"][0]["shape"] == [-1, 1024], md


def test_curl_infer_json_matches_onnxruntime(https_server, certs, specs, oracle, rng):
    x = lib.random_inputs(specs["mlp"], rng, 3)["INPUT0"]
    code, body = _curl_ok("--cacert", certs["ca"], "-H", "Content-Type: application/json",
                          "--data-binary", _mlp_json_body(x).decode(), _url(https_server, "/v2/models/mlp/infer"))
    assert code == 200, body
    _check_mlp_json(body, x, oracle, specs, "mlp JSON over HTTPS (curl)")


def test_curl_infer_binary_extension_matches_onnxruntime(https_server, certs, specs, oracle, rng, tmp_path):
    x = lib.random_inputs(specs["mlp"], rng, 2)["INPUT0"]
    head = json.dumps({"inputs": [{"name": "INPUT0", "shape": list(x.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    req = tmp_path / "req.bin"
    req.write_bytes(head + x.tobytes())
    hdrs = tmp_path / "headers.txt"
    code, body = _curl_ok("--cacert", certs["ca"], "-D", str(hdrs), "-H", "Content-Type: application/octet-stream",
                          "-H", "Inference-Header-Content-Length: %d" % len(head), "--data-binary", "@" + str(req),
                          _url(https_server, "/v2/models/mlp/infer"))
    assert code == 200, body
    hlen = [int(l.split(":")[1]) for l in hdrs.read_text().splitlines()
            if l.lower().startswith("inference-header-content-length:")][0]
    out = json.loads(body[:hlen])["outputs"][0]
    assert out["parameters"]["binary_data_size"] == x.shape[0] * 10 * 4 == len(body) - hlen, out
    got = np.frombuffer(body[hlen:], np.float32).reshape(out["shape"])
    lib.assert_close(got, oracle.run("mlp", {"INPUT0": x})["OUTPUT0"], specs["mlp"]["rtol"], what="mlp binary")


def test_curl_client_trusting_another_ca_refused(https_server, certs):
    rc, out, err = _curl("--cacert", certs["other_ca"], _url(https_server, "/v2/health/ready"))
    assert rc == 60, (rc, err)  # curl: peer certificate cannot be authenticated


def test_tls12_and_alpn_http11(https_server, certs):
    v = subprocess.run(["curl", "-sS", "-v", "--max-time", str(TIMEOUT_S), "--cacert", certs["ca"], "--tlsv1.2",
                        "--tls-max", "1.2", _url(https_server, "/v2/health/live")],
                       capture_output=True, text=True, timeout=TIMEOUT_S + 10)
    assert v.returncode == 0, v.stderr
    assert "TLSv1.2" in v.stderr and "ALPN: server accepted http/1.1" in v.stderr, v.stderr
    # below TLS 1.2: the server answers a TLS 1.1 ClientHello with a protocol_version alert
    old = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % https_server.http_port, "-tls1_1",
                          "-cipher", "DEFAULT:@SECLEVEL=0"], input="", capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    assert "alert protocol version" in old.stdout + old.stderr, old.stdout + old.stderr
    # a client that speaks only h2 gets no_application_protocol rather than a silent HTTP/1.1 peer
    ctx = _context(certs)
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", https_server.http_port), timeout=TIMEOUT_S) as raw:
        with pytest.raises(ssl.SSLError) as ei:
            ctx.wrap_socket(raw, server_hostname="localhost")
        assert "no application protocol" in str(ei.value), ei.value


def test_close_notify_on_connection_close(https_server, certs):
    v = subprocess.run(["curl", "-sS", "-v", "--max-time", str(TIMEOUT_S), "--cacert", certs["ca"], "-H",
                        "Connection: close", _url(https_server, "/v2/health/live")],
                       capture_output=True, text=True, timeout=TIMEOUT_S + 10)
    assert v.returncode == 0, v.stderr
    assert "TLS alert, close notify" in v.stderr, v.stderr


# --- HTTPS through tritonclient.http

def test_tritonclient_ssl_infer_matches_onnxruntime(https_server, certs, specs, oracle, rng):
    c = httpclient.InferenceServerClient("127.0.0.1:%d" % https_server.http_port, ssl=True,
                                         ssl_options={"ca_certs": certs["ca"]}, connection_timeout=TIMEOUT_S,
                                         network_timeout=TIMEOUT_S)
    try:
        assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("mlp")
        assert c.get_server_metadata()["name"] == "inferd"
        for binary in (True, False):
            feeds = lib.random_inputs(specs["mlp"], rng, 4)
            inp = httpclient.InferInput("INPUT0", list(feeds["INPUT0"].shape), "FP32")
            inp.set_data_from_numpy(feeds["INPUT0"], binary_data=binary)
            out = httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)
            res = c.infer("mlp", [inp], outputs=[out])
            lib.check_outputs({"OUTPUT0": res.as_numpy("OUTPUT0")}, oracle.run("mlp", feeds), specs["mlp"],
                              what="mlp over HTTPS, binary=%s" % binary)
    finally:
        c.close()


def test_tritonclient_insecure_skips_the_host_name_check(https_server, certs):
    """tritonclient's insecure=True skips matching the host name (127.0.0.2 is not in the SAN); the
    chain is still verified against ca_certs."""
    def client(insecure):
        return httpclient.InferenceServerClient("127.0.0.2:%d" % https_server.http_port, ssl=True,
                                                insecure=insecure, ssl_options={"ca_certs": certs["ca"]},
                                                connection_timeout=TIMEOUT_S, network_timeout=TIMEOUT_S)
    c = client(True)
    try:
        assert c.is_server_live()
    finally:
        c.close()
    c = client(False)
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            c.is_server_live()
    finally:
        c.close()


# --- what a wrong or hostile client gets

def test_plain_http_request_refused_in_plain_text(https_server):
    with socket.create_connection(("127.0.0.1", https_server.http_port), timeout=TIMEOUT_S) as s:
        s.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        got = lib.read_to_eof(s, 4096)
    assert got.startswith(b"HTTP/1.1 400 "), got
    assert b"use https://" in got and b"Connection: close" in got, got
    # and through a real client
    status, text = lib.http_get("http://127.0.0.1:%d/v2/health/ready" % https_server.http_port)
    assert status == 400 and "use https://" in text, (status, text)


@pytest.mark.parametrize("garbage", [b"\x00" * 64, bytes(range(256)) * 4,
                                     b"\x16\x03\x01\x00\x05" + b"\xff" * 5,  # a handshake record holding nonsense
                                     b"\x17\x03\x03\x40\x00" + b"A" * 100],  # application data before any handshake
                         ids=["zeros", "bytes", "bad_hello", "early_data"])
def test_garbage_closed_and_server_still_answers(https_server, certs, garbage):
    with socket.create_connection(("127.0.0.1", https_server.http_port), timeout=TIMEOUT_S) as s:
        s.sendall(garbage)
        assert _closed_by_server(s, TIMEOUT_S)
    status, _, _ = _request(https_server, certs, "GET", "/v2/health/live")
    assert status == 200


def test_stalled_handshakes_closed_and_others_served(https_server, certs):
    hello = _client_hello_prefix(https_server)
    silent = [socket.create_connection(("127.0.0.1", https_server.http_port), timeout=TIMEOUT_S) for _ in range(20)]
    half = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", https_server.http_port), timeout=TIMEOUT_S)
        s.sendall(hello[:len(hello) // 2])  # half a ClientHello, then nothing
        half.append(s)
    trickle = socket.create_connection(("127.0.0.1", https_server.http_port), timeout=TIMEOUT_S)
    t0 = time.monotonic()
    try:
        # while 41 handshakes hang, others are served at once
        for _ in range(5):
            status, _, _ = _request(https_server, certs, "GET", "/v2/health/ready")
            assert status == 200
        # a byte every 0.5 s keeps the connection active, but not through its handshake
        sent = 0
        trickle.settimeout(0.5)
        while time.monotonic() - t0 < HANDSHAKE_S + 5 and sent < len(hello):
            try:
                trickle.sendall(hello[sent:sent + 1])
            except OSError:
                break
            sent += 1
            try:
                if trickle.recv(1) == b"":
                    break
            except socket.timeout:
                pass
            except OSError:
                break
        assert sent < len(hello), "the trickled ClientHello was sent whole before the deadline"
        for s in silent + half + [trickle]:
            assert _closed_by_server(s, max(1.0, HANDSHAKE_S + 5 - (time.monotonic() - t0)))
        waited = time.monotonic() - t0
        assert waited >= HANDSHAKE_S - 1, waited  # not before the deadline
    finally:
        for s in silent + half + [trickle]:
            s.close()
    status, _, _ = _request(https_server, certs, "GET", "/v2/health/live")
    assert status == 200


def _client_hello_prefix(server):
    """The bytes of a real ClientHello (Python's ssl over memory BIOs), not sent anywhere else."""
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    hello = out.read()
    assert hello[0] == 0x16 and len(hello) > 100, hello[:8]
    return hello


def _tls_exchange(server, certs, data):
    """Sends data over a new TLS connection and reads until the server ends it: the raw answer."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=TIMEOUT_S) as raw:
        with _context(certs).wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(data)
            return lib.read_to_eof(s)


def test_header_and_body_limits_hold_after_decryption(https_server, certs):
    got = _tls_exchange(https_server, certs, b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000
                        + b"\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 431 "), got[:200]
    # a declared body over the limit is refused at the headers, before it is sent (the server would
    # drop 1 MiB of it and then reset a client that keeps sending)
    got = _tls_exchange(https_server, certs, b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 2097152\r\n\r\n{" + b" " * 1000)
    assert got.startswith(b"HTTP/1.1 413 "), got[:200]
    status, _, _ = _request(https_server, certs, "GET", "/v2/health/live")
    assert status == 200


def test_pipelined_requests_over_one_tls_connection(https_server, certs):
    """Three requests in one write (likely one TLS record): answered in order, the last closes."""
    ctx = _context(certs)
    with socket.create_connection(("127.0.0.1", https_server.http_port), timeout=TIMEOUT_S) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
                      b"GET /v2/models/nosuch HTTP/1.1\r\nHost: x\r\n\r\n"
                      b"GET /v2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            got = lib.read_to_eof(s)
    codes = re.findall(rb"HTTP/1\.1 (\d{3}) ", got)
    assert codes == [b"200", b"404", b"200"], got
    assert got.rstrip().endswith(b"}") and b'"inferd"' in got, got


def test_many_concurrent_tls_connections(https_server, certs, specs, oracle):
    """32 threads x 20 requests: even threads keep one tritonclient connection for their inferences, odd
    ones open a new TLS connection (a handshake) for every JSON inference. Every answer is checked."""
    rng = np.random.default_rng(lib.seed_from_env())
    inputs = [rng.uniform(-1, 1, (1 + i % 3, 1024)).astype(np.float32) for i in range(32)]
    want = [oracle.run("mlp", {"INPUT0": x})["OUTPUT0"] for x in inputs]
    errors, done = [], [0] * 32

    def keepalive(i):
        c = httpclient.InferenceServerClient("127.0.0.1:%d" % https_server.http_port, ssl=True,
                                             ssl_options={"ca_certs": certs["ca"]},
                                             connection_timeout=60, network_timeout=60)
        try:
            inp = httpclient.InferInput("INPUT0", list(inputs[i].shape), "FP32")
            inp.set_data_from_numpy(inputs[i])
            for _ in range(20):
                got = c.infer("mlp", [inp]).as_numpy("OUTPUT0")
                lib.assert_close(got, want[i], specs["mlp"]["rtol"], what="thread %d" % i)
                done[i] += 1
        finally:
            c.close()

    def fresh(i):
        body = _mlp_json_body(inputs[i])
        for _ in range(20):
            conn = http.client.HTTPSConnection("127.0.0.1", https_server.http_port, timeout=60,
                                               context=_context(certs))
            try:
                conn.request("POST", "/v2/models/mlp/infer", body=body, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                raw = r.read()
                assert r.status == 200, raw
                res = json.loads(raw)["outputs"][0]
                got = np.array(res["data"], np.float32).reshape(res["shape"])
                lib.assert_close(got, want[i], specs["mlp"]["rtol"], what="thread %d" % i)
                done[i] += 1
            finally:
                conn.close()

    def run(i):
        try:
            (keepalive if i % 2 == 0 else fresh)(i)
        except Exception as e:  # noqa: BLE001  (reported below with the thread's number)
            errors.append("thread %d: %r" % (i, e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[:5]
    assert done == [20] * 32, done


# --- mutual TLS

def test_mtls_right_client_cert_works(mtls_server, certs, specs, oracle, rng):
    code, body = _curl_ok("--cacert", certs["ca"], "--cert", certs["client_crt"], "--key", certs["client_key"],
                          _url(mtls_server, "/v2/health/ready"))
    assert code == 200
    c = httpclient.InferenceServerClient("127.0.0.1:%d" % mtls_server.http_port, ssl=True,
                                         ssl_options={"ca_certs": certs["ca"], "certfile": certs["client_crt"],
                                                      "keyfile": certs["client_key"]},
                                         connection_timeout=TIMEOUT_S, network_timeout=TIMEOUT_S)
    try:
        feeds = lib.random_inputs(specs["mlp"], rng, 2)
        inp = httpclient.InferInput("INPUT0", list(feeds["INPUT0"].shape), "FP32")
        inp.set_data_from_numpy(feeds["INPUT0"])
        res = c.infer("mlp", [inp])
        lib.check_outputs({"OUTPUT0": res.as_numpy("OUTPUT0")}, oracle.run("mlp", feeds), specs["mlp"],
                          what="mlp over mutual TLS")
    finally:
        c.close()


def _refused(server, certs, client):
    """The request fails in or right after the handshake (TLS 1.3 reports a missing or rejected client
    certificate with the first read), and no HTTP answer comes."""
    with pytest.raises((ssl.SSLError, ConnectionResetError, ConnectionAbortedError, BrokenPipeError,
                        http.client.RemoteDisconnected)):
        _request(server, certs, "GET", "/v2/health/ready", client=client)
    rc, out, err = _curl("--cacert", certs["ca"], *(["--cert", certs[client + "_crt"], "--key",
                                                      certs[client + "_key"]] if client else []),
                         _url(server, "/v2/health/ready"))
    assert rc != 0 and not out.startswith(b"200") and b"200" not in out.split(b"\n")[-1], (rc, out, err)
    return err


def test_mtls_client_without_cert_refused(mtls_server, certs):
    err = _refused(mtls_server, certs, None)
    assert "certificate required" in err or "handshake failure" in err, err


def test_mtls_client_cert_from_another_ca_refused(mtls_server, certs):
    err = _refused(mtls_server, certs, "other_client")
    assert "unknown ca" in err or "certificate" in err, err


def test_mtls_plain_http_refused(mtls_server):
    status, text = lib.http_get("http://127.0.0.1:%d/v2/health/ready" % mtls_server.http_port)
    assert status == 400 and "use https://" in text, (status, text)


# --- bad flags fail the start, naming them (bad files: test_tls.py, for both ports)

@pytest.mark.parametrize("args,msg", [
    (["--http-use-ssl", "true"], "needs --http-server-cert FILE and --http-server-key FILE"),
    (["--http-server-cert", "x.crt"], "need --http-use-ssl"),
    (["--http-use-ssl-mutual", "--http-server-cert", "a", "--http-server-key", "b"], "needs --http-root-cert"),
    (["--http-use-ssl", "maybe"], "expects true or false"),
])
def test_inconsistent_https_flags_refused(repo_dir, args, msg):
    r = subprocess.run([lib.inferd_bin(), "--model-repository", repo_dir] + args, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and msg in r.stderr, (r.returncode, r.stderr)


# --- certificates reloaded on SIGHUP

_install = tls_certs.install


def _live_args(certs, live, mutual=False):
    return tls_certs.server_args(certs, "http", mutual, crt=live["crt"], key=live["key"], bare=True)


@pytest.fixture()
def reload_server(repo_dir, certs, live):
    yield from lib.served(repo_dir, _live_args(certs, live))


def _keep_alive(server, certs, client=None):
    return http.client.HTTPSConnection("127.0.0.1", server.http_port, timeout=TIMEOUT_S,
                                       context=_context(certs, client))


def _ask(conn, method, path, body=None):
    """One request on a kept-alive connection (not closed): (status, body, the server's certificate DER)."""
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
    r = conn.getresponse()
    data = r.read()
    assert not r.will_close, "the server ended the keep-alive connection"
    return r.status, data, conn.sock.getpeercert(binary_form=True)


def _infer_on(conn, oracle, specs, rng, what):
    x = lib.random_inputs(specs["mlp"], rng, 2)["INPUT0"]
    status, body, cert = _ask(conn, "POST", "/v2/models/mlp/infer", _mlp_json_body(x))
    assert status == 200, body
    _check_mlp_json(body, x, oracle, specs, what)
    return cert


def _reloads(n, what="HTTPS certificates reloaded (SIGHUP)"):
    return lambda lines: sum(what in l for l in lines) >= n


def test_https_reload_on_sighup_keeps_open_connections(reload_server, certs, live, specs, oracle, rng):
    srv = reload_server
    old = _keep_alive(srv, certs)
    try:
        assert _infer_on(old, oracle, specs, rng, "mlp before the reload") == tls_certs.der(certs["server_crt"])
        _install(certs["server_b_crt"], certs["server_b_key"], live)
        srv.send_signal(signal.SIGHUP)
        lines = srv.await_stderr(_reloads(1))
        line = [l for l in lines if "HTTPS certificates reloaded (SIGHUP)" in l][0]
        assert "new connections get subject /CN=localhost, serial " in line, line
        # a new connection is handed B, and infers
        new = _keep_alive(srv, certs)
        try:
            assert _infer_on(new, oracle, specs, rng, "mlp after the reload") == tls_certs.der(certs["server_b_crt"])
        finally:
            new.close()
        # the keep-alive connection made with A was not dropped: same socket, still A, still answers
        sock = old.sock
        assert _infer_on(old, oracle, specs, rng, "mlp on the old connection") == tls_certs.der(certs["server_crt"])
        assert old.sock is sock
    finally:
        old.close()
    assert srv.alive()


@pytest.mark.parametrize("bad", tls_certs.BAD_RELOADS)
def test_https_bad_reload_keeps_certificates_in_service(reload_server, certs, live, specs, oracle, rng, bad):
    srv = reload_server
    _install(certs["server_b_crt"], certs["server_b_key"], live)
    srv.send_signal(signal.SIGHUP)
    srv.await_stderr(_reloads(1))
    want, f = tls_certs.install_bad(certs, live, bad)
    named = (live[f], "--http-server-cert" if f == "crt" else "--http-server-key")
    srv.send_signal(signal.SIGHUP)
    lines = srv.await_stderr(_reloads(1, "HTTPS certificates not reloaded (SIGHUP)"))
    why = [l for l in lines if "HTTPS certificates not reloaded" in l]
    assert len(why) == 1, why
    assert want in why[0] and all(n in why[0] for n in named) and "previous ones stay in service" in why[0], why
    c = _keep_alive(srv, certs)
    try:
        assert _infer_on(c, oracle, specs, rng, "mlp after a bad reload") == tls_certs.der(certs["server_b_crt"])
    finally:
        c.close()
    # a good set afterwards is taken again
    _install(certs["server_c_crt"], certs["server_c_key"], live)
    srv.send_signal(signal.SIGHUP)
    srv.await_stderr(_reloads(2))
    status, _, cert = _request_cert(srv, certs)
    assert status == 200 and cert == tls_certs.der(certs["server_c_crt"])


def _request_cert(server, certs, client=None):
    conn = _keep_alive(server, certs, client)
    try:
        return _ask(conn, "GET", "/v2/health/live")
    finally:
        conn.close()


@pytest.fixture()
def mtls_reload_server(repo_dir, certs, live):
    yield from lib.served(repo_dir, _live_args(certs, live, mutual=True))


def test_mtls_reload_keeps_client_verification(mtls_reload_server, certs, live):
    srv = mtls_reload_server
    _install(certs["server_b_crt"], certs["server_b_key"], live)
    srv.send_signal(signal.SIGHUP)
    srv.await_stderr(_reloads(1))
    status, _, cert = _request_cert(srv, certs, client="client")
    assert status == 200 and cert == tls_certs.der(certs["server_b_crt"])
    # the new context verifies client certificates as the first did
    _refused(srv, certs, None)
    _refused(srv, certs, "other_client")
