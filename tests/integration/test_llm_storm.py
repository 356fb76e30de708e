"""The generative backend under a cancellation storm and a full KV pool, on the CPU (issue 35's "no request
lost or cut short"; the same storm on a GPU: tests/gpu/llm_storm.py, run by tests/bench/llm/llm_gpu_bench.sh).

A tiny Llama fixture checkpoint whose pool holds 40 blocks of 4 tokens (about four of these sequences at
once) gets 48 concurrent greedy streams, half over gRPC ModelStreamInfer and half over HTTP generate_stream,
about a third cancelled at random points (stream cancel, connection closed); every uncancelled request must
end with its full length (or the end token) equal to its alone run, every cancelled one's tokens a prefix
of it, preemptions counted, the pool's blocks and the running and waiting gauges back to 0, and the server
alive. What each check means: tests/gpu/llm_storm.py."""

import json
import os
import subprocess
import sys

import pytest

import inferd_testlib as lib

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "llm"))
sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "gpu"))
import llm_ckpt  # noqa: E402
import llm_storm  # noqa: E402
from test_load import load_bin  # noqa: E402  (inferd-load beside the inferd under test)

FIXTURE = os.path.join(lib.REPO_ROOT, "tests", "llm", "fixtures", "llama3_gqa.json")


@pytest.fixture(scope="module")
def storm_srv(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("llm_storm"))
    with open(FIXTURE) as f:
        fx = json.load(f)
    llm_ckpt.write_checkpoint(fx, os.path.join(d, "storm", "1"))
    params = {"kv_block_tokens": 4, "kv_cache_blocks": 40, "max_model_len": 128, "max_num_seqs": 16,
              "max_num_batched_tokens": 64}
    text = 'backend: "inferd_llm"\nmax_batch_size: 0\n'
    text += "".join('parameters { key: "%s" value { string_value: "%s" } }\n' % kv for kv in params.items())
    with open(os.path.join(d, "storm", "config.pbtxt"), "w") as f:
        f.write(text + "instance_group [ { count: 1 kind: KIND_CPU } ]\n")
    yield from lib.served(d)


def test_cancellation_storm_full_pool(storm_srv):
    with open(FIXTURE) as f:
        cfg = json.load(f)["config"]
    eos = cfg["eos_token_id"] if isinstance(cfg["eos_token_id"], list) else [cfg["eos_token_id"]]
    plan = llm_storm.Plan(n=48, prompt=(4, 40), out=(8, 60), cancel_frac=0.35, stagger_s=0.3,
                          vocab=cfg["vocab_size"], seed=lib.seed_from_env(), eos=eos)
    checks, summary = llm_storm.storm(storm_srv.http_port, storm_srv.grpc_url, "storm", plan,
                                      alive=storm_srv.alive, timeout=120)
    report = "\n".join("%s %s: %s" % ("PASS" if ok else "FAIL", n, d) for n, ok, d in checks)
    print(report + "\nsummary: %s (seed %d)" % (json.dumps(summary), plan.seed))
    assert summary["passed"], report + "\n(INFERD_TEST_SEED=%d reproduces the workload)" % plan.seed
    assert summary["cancelled_grpc"] > 0 and summary["cancelled_http"] > 0, summary


def test_gpu_bench_script_on_the_cpu(tmp_path):
    """tests/bench/llm/llm_gpu_bench.py --smoke: the device bench's own code on the CPU with the tiny fixture
    (inferd-load's runs, the server's inter-token mean, the storm through its script, the one table), so a
    broken script is found here and not in a device call. transformers and bench_llm_decode say they did not
    run (no torch, no CUDA build here)."""
    bindir = str(tmp_path / "bin")
    os.makedirs(bindir)
    for name, path in (("inferd", lib.inferd_bin()), ("inferd-load", load_bin())):
        os.symlink(os.path.abspath(path), os.path.join(bindir, name))
    p = subprocess.run([sys.executable, os.path.join(lib.REPO_ROOT, "tests", "bench", "llm", "llm_gpu_bench.py"),
                        "--smoke", "--bin", bindir, "--work", str(tmp_path / "work"), "--budget", "240"],
                       capture_output=True, text=True, timeout=300)
    out = p.stdout
    assert p.returncode == 0, out[-4000:] + p.stderr[-2000:]
    rows = [l for l in out.splitlines() if l.startswith("| ")]
    got = {r.split(" | ")[0][2:]: r for r in rows}
    for api in ("gRPC ModelStreamInfer", "HTTP SSE"):
        r = got["256 streams, 512 in / 256 out, %s: output tokens/s" % api]
        assert "(16 of 16 completed, 0 short)" in r, r
    assert any(k.startswith("storm: 48 streams") and "| PASS: " in r and "lost 0, cut 0, wrong 0" in r
               for k, r in got.items()), rows
    assert "inferd exit code after SIGTERM: 0" in out and "storm server exit code after SIGTERM: 0" in out, out[-3000:]
