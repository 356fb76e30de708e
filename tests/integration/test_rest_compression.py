"""Triton's HTTP compression on the REST API: request bodies sent with Content-Encoding gzip/deflate
are inflated (under --http-max-infer-body-bytes, counted after inflating), inference answers are
compressed for Accept-Encoding gzip/deflate. Through tritonclient.http's own
request/response_compression_algorithm, curl --compressed, and raw HTTP for the layout and the errors
(a gzip bomb 413, a corrupt stream 400, an unknown coding 415 as Triton answers it). Values are checked
against onnxruntime."""

import gzip
import json
import os
import subprocess
import zlib

import numpy as np
import pytest
import tritonclient.http as httpclient

import inferd_testlib as lib

ALGOS = [None, "gzip", "deflate"]


@pytest.fixture(scope="module")
def hclient(server):
    c = httpclient.InferenceServerClient(url=server.http_url[len("http://"):])
    yield c
    c.close()


def _http(server, method, path, body=None, headers=None):
    return lib.http_call(server, method, path, body, headers, timeout=60)




def _unzip(enc, raw):
    return gzip.decompress(raw) if enc == "gzip" else zlib.decompress(raw)


def _zip(enc, raw):
    return gzip.compress(raw) if enc == "gzip" else zlib.compress(raw)


@pytest.mark.parametrize("req_algo", ALGOS)
@pytest.mark.parametrize("resp_algo", ALGOS)
def test_tritonclient_compression_matches_onnxruntime(hclient, specs, oracle, rng, req_algo, resp_algo):
    # mlp (FP32, batching) and ops_shape (an INT64 output), JSON and binary tensors both ways
    for name, batch in (("mlp", 3), ("ops_shape", 2)):
        spec = specs[name]
        for bin_in, bin_out in ((False, False), (True, True), (False, True), (True, False)):
            feeds = lib.random_inputs(spec, rng, batch)
            outs = [httpclient.InferRequestedOutput(o["name"], binary_data=bin_out) for o in spec["outputs"]]
            res = hclient.infer(name, lib.http_infer_inputs(feeds, bin_in), outputs=outs, request_id="z",
                                request_compression_algorithm=req_algo, response_compression_algorithm=resp_algo)
            resp = res.get_response()
            assert resp["model_name"] == name and resp["id"] == "z"
            for o in resp["outputs"]:
                assert ("data" in o) != bin_out, (name, o)
            got = {o["name"]: res.as_numpy(o["name"]) for o in resp["outputs"]}
            lib.check_outputs(got, oracle.run(name, feeds), spec,
                              what="%s in/out binary %s/%s, compression %s/%s" % (name, bin_in, bin_out, req_algo,
                                                                                  resp_algo))


@pytest.mark.parametrize("enc", ["gzip", "deflate"])
def test_binary_extension_layout_with_compression(server, specs, oracle, rng, enc):
    """Inference-Header-Content-Length counts the uncompressed JSON, in the request and in the answer."""
    spec = specs["ops_elementwise"]
    feeds = lib.random_inputs(spec, rng, 2)
    hdr = json.dumps({"inputs": [{"name": n, "shape": list(a.shape), "datatype": "FP32",
                                  "parameters": {"binary_data_size": a.nbytes}} for n, a in feeds.items()],
                      "parameters": {"binary_data_output": True}}).encode()
    plain = hdr + b"".join(a.tobytes() for a in feeds.values())
    status, headers, raw = _http(server, "POST", "/v2/models/ops_elementwise/infer", body=_zip(enc, plain),
                                 headers={"Content-Encoding": enc, "Inference-Header-Content-Length": str(len(hdr)),
                                          "Accept-Encoding": enc})
    assert status == 200, raw
    assert headers.get("Content-Encoding") == enc
    body = _unzip(enc, raw)
    assert len(raw) == int(headers["Content-Length"]) and len(raw) != len(body)
    hlen = int(headers["Inference-Header-Content-Length"])
    head = json.loads(body[:hlen])
    want = oracle.run("ops_elementwise", feeds)
    off = hlen
    for o in head["outputs"]:
        n = o["parameters"]["binary_data_size"]
        got = np.frombuffer(body[off:off + n], np.float32).reshape(o["shape"])
        lib.assert_close(got, want[o["name"]], spec["rtol"], what="%s %s" % (enc, o["name"]))
        off += n
    assert off == len(body)
    # the header length is checked against the inflated body, not the compressed one
    status, _, raw = _http(server, "POST", "/v2/models/ops_elementwise/infer", body=_zip(enc, plain),
                           headers={"Content-Encoding": enc, "Inference-Header-Content-Length": str(len(plain) + 1)})
    assert status == 400 and "Inference-Header-Content-Length" in lib.rest_error(raw)


def test_accept_encoding_choice_and_plain_answers(server, specs, rng):
    spec = specs["versioned"]
    x = lib.random_inputs(spec, rng, 1)["V_X"]
    body = json.dumps({"inputs": [{"name": "V_X", "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()
    for accept, want in (("deflate;q=0.4, gzip;q=0.9", "gzip"), ("gzip;q=0, deflate", "deflate"),
                         ("br", None), ("identity", None), (None, None)):
        status, headers, raw = _http(server, "POST", "/v2/models/versioned/infer", body=body,
                                     headers={"Accept-Encoding": accept} if accept else {})
        assert status == 200, raw
        assert headers.get("Content-Encoding") == want, accept
        j = json.loads(_unzip(want, raw) if want else raw)
        assert j["outputs"][0]["name"] == "V_Y"
    # errors are answered plain, as Triton answers them
    status, headers, raw = _http(server, "POST", "/v2/models/no_such_model/infer", body=body,
                                 headers={"Accept-Encoding": "gzip"})
    assert status == 404 and "Content-Encoding" not in headers
    assert "no_such_model" in lib.rest_error(raw)


def test_curl_compressed(server, specs, oracle, tmp_path):
    x = np.linspace(-3, 3, 1024, dtype=np.float32).reshape(1, 1024)
    req = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 1024], "datatype": "FP32",
                                  "data": x.ravel().tolist()}]}).encode()
    (tmp_path / "req.json.gz").write_bytes(gzip.compress(req))
    url = server.http_url + "/v2/models/mlp/infer"
    out = subprocess.run(["curl", "-sS", "--fail-with-body", "--compressed", "-D", str(tmp_path / "h"),
                          "-H", "Content-Type: application/json", "-H", "Content-Encoding: gzip",
                          "--data-binary", "@" + str(tmp_path / "req.json.gz"), url],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr + out.stdout
    headers = (tmp_path / "h").read_text().lower()
    assert "content-encoding: gzip" in headers or "content-encoding: deflate" in headers, headers
    res = json.loads(out.stdout)  # curl inflated it
    got = np.array(res["outputs"][0]["data"], np.float32).reshape(1, 10)
    lib.assert_close(got, oracle.run("mlp", {"INPUT0": x})["OUTPUT0"], specs["mlp"]["rtol"], what="curl --compressed")


def test_gzip_bomb_and_the_inflated_limit(start_server, specs, rng):
    srv = start_server(["--http-max-infer-body-bytes", str(1 << 20)])
    spec = specs["mlp"]
    x = lib.random_inputs(spec, rng, 1)["INPUT0"]
    ok = json.dumps({"inputs": [{"name": "INPUT0", "shape": list(x.shape), "datatype": "FP32",
                                 "data": x.ravel().tolist()}]}).encode()
    assert len(ok) < (1 << 20)
    status, _, raw = _http(srv, "POST", "/v2/models/mlp/infer", body=gzip.compress(ok),
                           headers={"Content-Encoding": "gzip"})
    assert status == 200, raw
    # the same JSON padded with blanks past 1 MiB: valid, small on the wire, too large inflated
    padded = ok[:-1] + b" " * (1 << 20) + b"}"
    status, _, raw = _http(srv, "POST", "/v2/models/mlp/infer", body=gzip.compress(padded),
                           headers={"Content-Encoding": "gzip"})
    assert status == 413 and "1048576" in lib.rest_error(raw)
    # a bomb: 256 MiB of zeros in about 250 KB
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    z = b"".join(bomb.compress(bytes(1 << 20)) for _ in range(256)) + bomb.flush()
    assert len(z) < (1 << 20)
    status, _, raw = _http(srv, "POST", "/v2/models/mlp/infer", body=z, headers={"Content-Encoding": "gzip"})
    assert status == 413 and "inflates to more than" in lib.rest_error(raw)
    assert srv.alive()


@pytest.mark.parametrize("body,enc,needle", [
    (b"this is not gzip", "gzip", "corrupt"),
    (gzip.compress(b'{"inputs": []}')[:-6], "gzip", "truncated"),
    (gzip.compress(b'{"inputs": []}') + b"junk", "gzip", "after the end"),
    (b"\x78\x9c garbage", "deflate", "corrupt"),
])
def test_corrupt_body_is_400(server, body, enc, needle):
    status, headers, raw = _http(server, "POST", "/v2/models/mlp/infer", body=body,
                                 headers={"Content-Encoding": enc})
    assert status == 400, raw
    assert headers["Content-Type"] == "application/json"
    assert needle in lib.rest_error(raw)


def test_unknown_encoding_is_415(server):
    status, headers, raw = _http(server, "POST", "/v2/models/mlp/infer", body=b"(\xb5/\xfd...",
                                 headers={"Content-Encoding": "zstd"})
    assert status == 415, raw
    assert headers.get("Accept-Encoding") == "gzip, deflate"
    assert "zstd" in lib.rest_error(raw)
    assert server.alive()
