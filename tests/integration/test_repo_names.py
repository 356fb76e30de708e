"""Model names come from directory names (issue 15): a directory whose name is not UTF-8, or carries control
characters (C0, DEL, C1), is not a model. It is skipped with one warning line naming it with its bytes escaped,
and never listed: the repository index, metadata, statistics, /metrics and REST JSON stay valid UTF-8 with no
control characters, and the good model beside it serves. The same in poll mode (a directory that appears
later: one warning, not one per poll) and explicit mode (a load request or --load-model naming one is refused
without echoing it).
"""

import json
import os
import shutil

import grpc
import pytest
import tritonclient.grpc as grpcclient

import inferd_testlib as lib

# raw directory names (bytes), each holding a loadable copy of the seed mlp: only the name is wrong
BAD = {
    b"bad\xff\xfename": "is not valid UTF-8",
    b"ovl\xc0\xafname": "is not valid UTF-8",          # an overlong '/'
    b"esc\x1b[31mred": "contains control characters",   # a terminal escape
    b"nl\nname": "contains control characters",
    b"c1\xc2\x85name": "contains control characters",   # U+0085 NEXT LINE: valid UTF-8, a C1 control
}
# how srv_log shows them (its escapes: \n, \t, \r, \\, \xHH)
SHOWN = {b"bad\xff\xfename": r"bad\xff\xfename", b"ovl\xc0\xafname": r"ovl\xc0\xafname",
         b"esc\x1b[31mred": r"esc\x1b[31mred", b"nl\nname": r"nl\nname", b"c1\xc2\x85name": r"c1\xc2\x85name"}
GOOD_UNICODE = "mlp_caf\u00e9"  # UTF-8 beyond ASCII is a fine name


def _copy_model(src_dir, dst_dir):
    """A copy of a model directory whose config.pbtxt names no model (the directory name is the name)."""
    shutil.copytree(src_dir, dst_dir)
    cfg = os.path.join(dst_dir, b"config.pbtxt" if isinstance(dst_dir, bytes) else "config.pbtxt")
    with open(cfg) as f:
        lines = [l for l in f.read().splitlines() if not l.startswith("name:")]  # the top-level one only
    with open(cfg, "w") as f:
        f.write("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def names_repo(tmp_path_factory):
    g = lib.gen_models
    d = str(tmp_path_factory.mktemp("names_repo"))
    repo = g.Repo(d)
    g.add_mlp(repo)
    for raw in BAD:
        _copy_model(os.path.join(d, "mlp").encode(), os.path.join(d.encode(), raw))
    _copy_model(os.path.join(d, "mlp"), os.path.join(d, GOOD_UNICODE))
    spec = dict(repo.specs["mlp"], name=GOOD_UNICODE)
    return d, {"mlp": repo.specs["mlp"], GOOD_UNICODE: spec}


def _strict_text(raw):
    """raw decoded as UTF-8, failing on any bad byte; and no control character but newline/tab."""
    text = raw.decode("utf-8")  # strict: raises on invalid UTF-8
    bad = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f]
    assert not bad, "control characters %r in %r" % (bad, text[:400])
    return text


def _http(srv, method, path, body=None):
    return lib.http_call(srv, method, path, body, {"Content-Type": "application/json"} if body is not None else None)


def _warnings(srv):
    return [l for l in srv.stderr_text().splitlines() if "skipping directory" in l]


def _check_surfaces(srv, pb, names, unloaded=()):
    """Every surface that lists or names models: valid UTF-8, no control characters, exactly `names` (the
    loaded ones); the repository index also `unloaded`, the repository's other models, by name alone."""
    with grpc.insecure_channel(srv.grpc_url) as ch:
        stub = pb.grpc.GRPCInferenceServiceStub(ch)
        # the Python protobuf runtime refuses a string field that is not UTF-8 while parsing
        idx = stub.RepositoryIndex(pb.service.RepositoryIndexRequest())
        assert sorted(m.name for m in idx.models) == sorted(list(names) + list(unloaded)), idx
        assert all(m.state == ("READY" if m.name in names else "") for m in idx.models), idx
        stats = stub.ModelStatistics(pb.service.ModelStatisticsRequest())
        assert sorted({s.name for s in stats.model_stats}) == sorted(names), stats
        for n in names:
            md = stub.ModelMetadata(pb.service.ModelMetadataRequest(name=n))
            assert md.name == n
    status, _, body = _http(srv, "POST", "/v2/repository/index", b"{}")
    assert status == 200, body
    assert sorted(m["name"] for m in json.loads(_strict_text(body))) == sorted(list(names) + list(unloaded))
    status, _, body = _http(srv, "GET", "/v2/models/stats")
    assert status == 200, body
    assert sorted({m["name"] for m in json.loads(_strict_text(body))["model_stats"]}) == sorted(names)
    status, _, body = _http(srv, "GET", "/metrics")
    assert status == 200
    samples = lib.parse_metrics(_strict_text(body))
    assert {l["model"] for _, l, _ in samples if "model" in l} == set(names)


def _infer_ok(srv, spec, model, oracle_dir, rng):
    feeds = lib.random_inputs(spec, rng, 2)
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        _, got = lib.infer(c, model, feeds)
    want = lib.Oracle(oracle_dir, {"mlp": spec}).run("mlp", feeds)
    lib.check_outputs(got, want, spec)


def test_bad_directory_names_are_skipped_with_one_warning(names_repo, pb, rng):
    d, specs = names_repo
    srv = lib.ServerProcess(d)
    srv.start()
    try:
        warn = _warnings(srv)
        for raw, why in BAD.items():
            mine = [l for l in warn if "'%s'" % SHOWN[raw] in l]
            assert len(mine) == 1 and why in mine[0], (raw, warn)
        assert len(warn) == len(BAD), warn
        # the whole log stays one record a line, UTF-8 throughout (the escapes did their work)
        _strict_text(srv.stderr_text().encode("utf-8", "surrogateescape"))
        _check_surfaces(srv, pb, ["mlp", GOOD_UNICODE])
        _infer_ok(srv, specs["mlp"], "mlp", d, rng)
        _infer_ok(srv, specs["mlp"], GOOD_UNICODE, d, rng)
        assert lib.http_get(srv.http_url + "/v2/health/ready")[0] == 200
    finally:
        srv.stop()
    srv.assert_clean_exit()


def test_poll_mode_warns_once_for_a_directory_added_later(names_repo, pb, tmp_path):
    d, specs = names_repo
    repo = str(tmp_path / "poll_repo")
    os.makedirs(repo)
    _copy_model(os.path.join(d, "mlp"), os.path.join(repo, "mlp"))
    srv = lib.ServerProcess(repo, ["--model-control-mode", "poll", "--repository-poll-secs", "1"])
    srv.start()
    try:
        assert _warnings(srv) == []
        raw = b"late\xffname"
        _copy_model(os.path.join(d, "mlp").encode(), os.path.join(repo.encode(), raw))
        srv.await_stderr(lambda ls: any("skipping directory" in l and r"late\xffname" in l for l in ls), timeout=30)
        # two more polls must pass without another warning: each shows as a model it loads
        for extra in ("mlp_b", "mlp_c"):
            _copy_model(os.path.join(d, "mlp"), os.path.join(repo, extra))
            srv.await_stderr(lambda ls, e=extra: any("model '%s' loaded" % e in l for l in ls), timeout=30)
        assert len([l for l in _warnings(srv) if r"late\xffname" in l]) == 1, _warnings(srv)
        _check_surfaces(srv, pb, ["mlp", "mlp_b", "mlp_c"])
    finally:
        srv.stop()
    srv.assert_clean_exit()


def test_explicit_mode_refuses_bad_names(names_repo, pb):
    d, _ = names_repo
    srv = lib.ServerProcess(d, ["--model-control-mode", "explicit", "--load-model", "mlp",
                                "--load-model", "nl\nname"])
    srv.start()
    try:
        assert any(r"--load-model 'nl\nname' skipped" in l and "control characters" in l
                   for l in srv.stderr_text().splitlines()), srv.stderr_tail()
        with grpc.insecure_channel(srv.grpc_url) as ch:
            stub = pb.grpc.GRPCInferenceServiceStub(ch)
            for name in ("esc\x1b[31mred", "c1\u0085name", "nl\nname"):
                with pytest.raises(grpc.RpcError) as ei:
                    stub.RepositoryModelLoad(pb.service.RepositoryModelLoadRequest(model_name=name))
                assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert ei.value.details() == "the model name contains control characters", ei.value.details()
        status, _, body = _http(srv, "POST", "/v2/repository/models/esc%1B%5B31mred/load", b"{}")
        assert status == 400 and "control characters" in lib.rest_error(_strict_text(body)), body
        _check_surfaces(srv, pb, ["mlp"], unloaded=[GOOD_UNICODE])
        # "*" scans: the bad directories are skipped with their warning, the good ones load
    finally:
        srv.stop()
    srv.assert_clean_exit()
    srv2 = lib.ServerProcess(d, ["--model-control-mode", "explicit", "--load-model", "*"])
    srv2.start()
    try:
        assert len(_warnings(srv2)) == len(BAD), _warnings(srv2)
        _check_surfaces(srv2, pb, ["mlp", GOOD_UNICODE])
    finally:
        srv2.stop()
    srv2.assert_clean_exit()
