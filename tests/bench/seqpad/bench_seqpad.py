"""Side-by-side: requests of mixed sequence lengths on the masked-attention model of
tests/integration/test_seqpad.py, served twice by one inferd (CPU instance each): with
pad_to_longest (unbounded, and pad_max_ratio 2) and without (lengths never mix). A closed loop of
C client threads' worth of tritonclient gRPC calls per model, rounds interleaved so both see the
same machine state; prints requests/s and executions per request for each.

  INFERD_BIN=build/bin/inferd python tests/bench/seqpad/bench_seqpad.py [--conc 16] [--n 600]
"""

import argparse
import concurrent.futures as cf
import os
import sys
import tempfile
import time

import numpy as np
import tritonclient.grpc as grpcclient

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import inferd_testlib as lib  # noqa: E402
import test_seqpad as tsp  # noqa: E402

DB = "dynamic_batching { max_queue_delay_microseconds: 2000 }\n"
MODELS = {
    "nopad": "max_batch_size: 16\n" + DB + tsp.CPU,
    "pad": "max_batch_size: 16\n" + DB + tsp.CPU + tsp.PAD % "input_ids,attention_mask",
    "pad_r2": "max_batch_size: 16\n" + DB + tsp.CPU + tsp.PAD % "input_ids,attention_mask" + tsp.RATIO % "2",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conc", type=int, default=16)
    ap.add_argument("--n", type=int, default=600, help="requests per model per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-len", type=int, default=64)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="seqpad_bench_")
    onnx_path = os.path.join(d, "m.onnx")
    tsp.make_model(onnx_path)
    data = open(onnx_path, "rb").read()
    for name, cfg in MODELS.items():
        os.makedirs(os.path.join(d, name, "1"))
        open(os.path.join(d, name, "1", "model.onnx"), "wb").write(data)
        open(os.path.join(d, name, "config.pbtxt"), "w").write('name: "%s"\n' % name + cfg)
    srv = lib.ServerProcess(d).start()
    try:
        clients = [grpcclient.InferenceServerClient(url=srv.grpc_url) for _ in range(a.conc)]
        rng = np.random.default_rng(0)
        lens = rng.integers(1, a.max_len + 1, size=a.n)
        reqs = [tsp.feeds(rng, int(L)) for L in lens]
        res = {m: [0.0, 0] for m in MODELS}
        for _ in range(a.rounds):
            for m in MODELS:
                ex0 = tsp.stats(clients[0], m).execution_count
                t = time.perf_counter()
                with cf.ThreadPoolExecutor(a.conc) as ex:
                    list(ex.map(lambda i: clients[i % a.conc].infer(m, lib.triton_inputs(reqs[i])), range(a.n)))
                res[m][0] += time.perf_counter() - t
                res[m][1] += tsp.stats(clients[0], m).execution_count - ex0
        base = a.rounds * a.n / res["nopad"][0]
        for m, (dt, ex) in res.items():
            rps = a.rounds * a.n / dt
            print("%-7s %8.1f req/s  x%.2f vs nopad  %.2f requests per execution" % (
                m, rps, rps / base, a.rounds * a.n / max(ex, 1)))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
