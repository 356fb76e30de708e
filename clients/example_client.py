#!/usr/bin/env python3
"""A minimal inferd client with tritonclient.grpc (pip install "tritonclient[grpc]").

Checks that the server is live and ready, prints the model's metadata, runs one inference
on the seed model "mlp" (INPUT0 [1,1024] FP32 -> OUTPUT0 [1,10] FP32) and prints the argmax
and the server's statistics for the model.

  python clients/example_client.py --url localhost:8001 [--model mlp] [--seed 0]
"""

import argparse
import sys

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException


def avg_us(duration):
    """Average of a StatisticDuration (count, total ns) in microseconds."""
    return duration.ns / duration.count / 1000.0 if duration.count else 0.0


def main():
    ap = argparse.ArgumentParser(description="inferd example client (KServe v2 / Triton gRPC)")
    ap.add_argument("--url", default="localhost:8001", help="server gRPC address (default localhost:8001)")
    ap.add_argument("--model", default="mlp", help="model name (default mlp)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    args = ap.parse_args()

    client = grpcclient.InferenceServerClient(url=args.url)
    try:
        # 1. Health.
        print("server live: %s" % client.is_server_live())
        print("server ready: %s" % client.is_server_ready())
        print("model %s ready: %s" % (args.model, client.is_model_ready(args.model)))

        # 2. What the model takes and returns.
        md = client.get_model_metadata(args.model)
        for kind, tensors in (("input", md.inputs), ("output", md.outputs)):
            for t in tensors:
                print("%s %s %s %s" % (kind, t.name, t.datatype, list(t.shape)))

        # 3. One inference: a batch of one row of 1024 floats.
        x = np.random.default_rng(args.seed).standard_normal((1, 1024)).astype(np.float32)
        inp = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = client.infer(args.model, [inp], outputs=[grpcclient.InferRequestedOutput("OUTPUT0")])
        y = result.as_numpy("OUTPUT0")
        print("OUTPUT0 shape %s, argmax %d" % (list(y.shape), int(np.argmax(y[0]))))

        # 4. The server's statistics for the model (cumulative since it loaded).
        stats = client.get_inference_statistics(args.model).model_stats[0]
        s = stats.inference_stats
        print("statistics for %s: %d inferences in %d executions" % (
            args.model, stats.inference_count, stats.execution_count))
        print("  success %d (avg %.1f us), queue avg %.1f us, compute input/infer/output avg %.1f/%.1f/%.1f us" % (
            s.success.count, avg_us(s.success), avg_us(s.queue), avg_us(s.compute_input), avg_us(s.compute_infer),
            avg_us(s.compute_output)))
    except InferenceServerException as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
