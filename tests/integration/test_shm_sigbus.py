"""Issue 31, item 8: a client that shrinks its shared memory object after registering it. The server maps
the object; touching the pages the client cut off raises SIGBUS, which used to kill the server. Now every
copy from and into a mapping runs under a guard: the request that met the fault fails with
INVALID_ARGUMENT naming the tensor and the region, the rest of its batch and the server go on, and the
log says so once (rate-limited) rather than once per request."""

import concurrent.futures as cf
import os

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

SHRANK = "shrank below its registered size"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    g = lib.gen_models
    return lib.generated_repo(tmp_path_factory, "shm_sigbus_repo", (g.add_mlp, g.add_batching))


@pytest.fixture(scope="module")
def srv(repo):
    yield from lib.served(repo[0], ["--allow-client-shm", "true"])


@pytest.fixture(scope="module")
def sc(srv):
    yield from lib.grpc_client(srv)


class Obj:
    """A POSIX shared memory object made by hand (/dev/shm), so the test can ftruncate it under the server."""

    def __init__(self, name, size):
        self.key = "/inferd_sigbus_%d_%s" % (os.getpid(), name)
        self.name, self.size = name, size
        self.fd = os.open("/dev/shm" + self.key, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
        os.ftruncate(self.fd, size)

    def write(self, arr, offset=0):
        os.pwrite(self.fd, np.ascontiguousarray(arr).tobytes(), offset)

    def read(self, dtype, shape, offset=0):
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return np.frombuffer(os.pread(self.fd, n, offset), dtype=dtype).reshape(shape)

    def shrink(self, to=0):
        os.ftruncate(self.fd, to)

    def restore(self):
        os.ftruncate(self.fd, self.size)

    def close(self):
        os.close(self.fd)
        os.unlink("/dev/shm" + self.key)


@pytest.fixture
def objs(sc):
    made = []

    def _make(name, size, offset=0):
        o = Obj(name, size)
        made.append(o)
        sc.register_system_shared_memory(name, o.key, size - offset, offset=offset)
        return o

    yield _make
    sc.unregister_system_shared_memory()
    for o in made:
        o.close()


def _in(name, shape, region, nbytes, offset=0):
    x = grpcclient.InferInput(name, list(shape), "FP32")
    x.set_shared_memory(region, nbytes, offset=offset)
    return x


def _raw_in(name, arr):
    x = grpcclient.InferInput(name, list(arr.shape), "FP32")
    x.set_data_from_numpy(arr)
    return x


def _out(name, region, nbytes, offset=0):
    o = grpcclient.InferRequestedOutput(name)
    o.set_shared_memory(region, nbytes, offset=offset)
    return o


def _fails(fn, *words):
    with pytest.raises(InferenceServerException) as ei:
        fn()
    status, msg = lib.status_name(ei.value), lib.error_message(ei.value)
    assert status == "INVALID_ARGUMENT" and SHRANK in msg and all(w in msg for w in words), (status, msg)


def _alive(sc, specs, oracle_feeds, want):
    assert sc.is_server_live() and sc.is_server_ready()
    res = sc.infer("mlp", [_raw_in("INPUT0", oracle_feeds["INPUT0"])])
    lib.assert_close(res.as_numpy("OUTPUT0"), want, specs["mlp"]["rtol"], what="a plain inference afterwards")


def test_shrunk_input_and_output_fail_alone(srv, sc, repo, objs, rng):
    """A lone request (read in place before the fix) with its input in a truncated object, and one whose
    output goes to a truncated object: each fails with a clear status, five times over; the server
    lives, and the same regions work again once the object has its size back."""
    specs = repo[1]
    oracle = lib.Oracle(*repo)
    feeds = lib.random_inputs(specs["mlp"], rng, 2)
    x = feeds["INPUT0"]
    want = oracle.run("mlp", feeds)["OUTPUT0"]
    page = os.sysconf("SC_PAGE_SIZE")
    # the input sits in the object's second page, behind an offset: shrinking to one page is enough
    o_in = objs("sb_in", page + x.nbytes, offset=page)
    o_out = objs("sb_out", 2 * page)
    o_in.write(x, page)
    inp = [_in("INPUT0", x.shape, "sb_in", x.nbytes)]
    out = [_out("OUTPUT0", "sb_out", want.nbytes, offset=page)]
    sc.infer("mlp", inp, outputs=out)
    lib.assert_close(o_out.read(np.float32, want.shape, page), want, specs["mlp"]["rtol"], what="before shrinking")
    for i in range(5):
        o_in.shrink(page if i % 2 else 0)
        _fails(lambda: sc.infer("mlp", inp), "input 'INPUT0'", "'sb_in'")
        o_out.shrink(page if i % 2 else 0)
        _fails(lambda: sc.infer("mlp", [_raw_in("INPUT0", x)], outputs=out), "output 'OUTPUT0'", "'sb_out'")
        _alive(sc, specs, feeds, want)
        o_in.restore()
        o_out.restore()
        o_in.write(x, page)  # the pages come back zeroed
        sc.infer("mlp", inp, outputs=out)
        lib.assert_close(o_out.read(np.float32, want.shape, page), want, specs["mlp"]["rtol"], what="restored")
    # one warning line for the lot, not one per request
    lines = srv.await_stderr(lambda ls: any("shrank its shared memory object" in l for l in ls))
    hits = [l for l in lines if "shrank its shared memory object" in l]
    assert len(hits) == 1, hits
    assert "'sb_in'" in hits[0] or "'sb_out'" in hits[0], hits


def test_shrunk_request_fails_its_batch_goes_on(srv, sc, repo, objs, rng):
    """bt_pref4 batches four requests; one reads its input from a truncated object. It alone fails; the
    other three get their right answers from the same batch (one execution)."""
    specs = repo[1]
    oracle = lib.Oracle(*repo)
    feeds = [lib.random_inputs(specs["bt_pref4"], rng, 1) for _ in range(4)]
    wants = [oracle.run("bt_pref4", f)["V_Y"] for f in feeds]
    nin = feeds[0]["V_X"].nbytes
    good = objs("sb_good", 4 * nin)
    bad = objs("sb_bad", nin)
    for i, f in enumerate(feeds):
        good.write(f["V_X"], i * nin)
    bad.write(feeds[3]["V_X"])
    bad.shrink(0)
    before = sc.get_inference_statistics("bt_pref4").model_stats[0]

    def one(i):
        inp = _in("V_X", [1, 8], "sb_bad", nin) if i == 3 else _in("V_X", [1, 8], "sb_good", nin, offset=i * nin)
        with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
            try:
                return c.infer("bt_pref4", [inp]).as_numpy("V_Y")
            except InferenceServerException as e:
                return e

    with cf.ThreadPoolExecutor(4) as ex:
        got = list(ex.map(one, range(4)))
    after = sc.get_inference_statistics("bt_pref4").model_stats[0]
    assert after.execution_count - before.execution_count == 1, "the four requests did not form one batch"
    for i in range(3):
        assert not isinstance(got[i], Exception), got[i]
        lib.assert_close(got[i], wants[i], specs["bt_pref4"]["rtol"], what="request %d" % i)
    e = got[3]
    assert isinstance(e, InferenceServerException), e
    assert lib.status_name(e) == "INVALID_ARGUMENT" and SHRANK in lib.error_message(e), e
    assert "'V_X'" in lib.error_message(e) and "'sb_bad'" in lib.error_message(e)
    assert sc.is_server_live()


def test_shrunk_over_http(srv, sc, repo, objs, rng):
    """The same through the REST front: 400 with the message, the server lives."""
    specs = repo[1]
    x = lib.random_inputs(specs["mlp"], rng, 1)["INPUT0"]
    o = objs("sb_http", x.nbytes)
    o.write(x)
    o.shrink(0)
    hc = httpclient.InferenceServerClient(url=srv.http_url.split("://")[-1])
    try:
        i = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
        i.set_shared_memory("sb_http", x.nbytes)
        with pytest.raises(InferenceServerException) as ei:
            hc.infer("mlp", [i])
        assert str(ei.value.status()) == "400" and SHRANK in ei.value.message(), ei.value
        assert hc.is_server_live()
    finally:
        hc.close()
