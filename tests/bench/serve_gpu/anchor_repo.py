#!/usr/bin/env python3
"""Repositories and the request of the transport table (issue 13), served as the anchors' peer serves it.

The seed MLP (1024-512-10, weights as tests/bench/engine) under the name the anchors' request uses: model
`simplenet`, input `input` FP32 [-1,1024], output `output`. One repository per server variant, since every
variant answers to the same model name:

  DIR/<variant>/simplenet/{config.pbtxt,1/model.onnx}
  DIR/req.bin          the 4 KB ModelInferRequest of ../shared/anchors/peer.py makereq (same bytes, no torch)
  DIR/req_big.bin      the same with a [1, 4096] input, for the big: (4x4096) variants

usage: anchor_repo.py DIR VARIANT...   VARIANT = KIND:PRECISION:DELAY_US:COUNT, e.g. gpu:fp16:500:2, cpu:fp32:-:1
       (DELAY_US '-': no batching, max_batch_size 0; 0: dynamic batching without delay; PRECISION fp32 or fp16, ignored on the CPU); the directory of a variant
       is its spec with ':' replaced by '_'. Also big:KIND:PRECISION:DELAY:COUNT writes the 4x4096 MLP instead.
"""
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine"))
import gen_bench_models as gbm  # noqa: E402


def renamed(model, inp, out):
    """The same graph with its input and output renamed (the anchors' request names them input/output)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for n in g.node:
        n.input[:] = [inp if x == "INPUT0" else x for x in n.input]
        n.output[:] = [out if x == "OUTPUT0" else x for x in n.output]
    g.input[0].name = inp
    g.output[0].name = out
    return m


def config(kind, prec, delay, count, in_dim, out_dim):
    """delay '-': no batching at all. Not max_batch_size 1024 without dynamic_batching: config auto-complete
    (as Triton's) adds dynamic_batching with a zero delay to that; max_batch_size 0 keeps every request alone."""
    s = 'name: "simplenet"\nplatform: "onnxruntime_onnx"\n'
    if delay == "-":
        s += 'max_batch_size: 0\n'
        s += 'input [ { name: "input" data_type: TYPE_FP32 dims: [ -1, %d ] } ]\n' % in_dim
        s += 'output [ { name: "output" data_type: TYPE_FP32 dims: [ -1, %d ] } ]\n' % out_dim
    else:
        s += 'max_batch_size: 1024\n'
        s += 'input [ { name: "input" data_type: TYPE_FP32 dims: [ %d ] } ]\n' % in_dim
        s += 'output [ { name: "output" data_type: TYPE_FP32 dims: [ %d ] } ]\n' % out_dim
    if delay != "-":
        s += "dynamic_batching { max_queue_delay_microseconds: %d }\n" % int(delay)
    s += "instance_group [ { kind: %s count: %d } ]\n" % ("KIND_GPU" if kind == "gpu" else "KIND_CPU", int(count))
    if kind == "gpu" and prec == "fp16":
        s += 'parameters { key: "precision" value { string_value: "fp16" } }\n'
    return s


def request_class():
    """ModelInferRequest from tritonclient, or, where it is not installed (the GPU machine's torch venv), from the
    anchors' kserve_min.desc (env KSERVE_DESC) as peer.py builds it: protobuf alone."""
    try:
        from tritonclient.grpc import service_pb2
        return service_pb2.ModelInferRequest
    except ImportError:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        desc = os.environ.get("KSERVE_DESC")
        if not desc or not os.path.exists(desc):
            sys.exit("anchor_repo.py: no tritonclient and no KSERVE_DESC (the anchors' kserve_min.desc)")
        with open(desc, "rb") as f:
            fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
        pool = descriptor_pool.DescriptorPool()
        for fd in fds.file:
            pool.Add(fd)
        return message_factory.GetMessageClass(pool.FindMessageTypeByName("inference.ModelInferRequest"))


def request_bytes(width=1024):
    """peer.py makereq's message: model simplenet, id "x", one FP32 [1,1024] input from default_rng(0); width 4096
    gives the same request for the 4x4096 MLP (req_big.bin)."""
    r = request_class()(model_name="simplenet", id="x")
    t = r.inputs.add()
    t.name, t.datatype = "input", "FP32"
    t.shape.extend([1, width])
    r.raw_input_contents.append(np.random.default_rng(0).standard_normal((1, width)).astype(np.float32).tobytes())
    return r.SerializeToString()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "req.bin"), "wb") as f:
        f.write(request_bytes())
    with open(os.path.join(out, "req_big.bin"), "wb") as f:
        f.write(request_bytes(4096))
    write_repos(out, sys.argv[2:])
    print("wrote %s" % out, file=sys.stderr)


def write_repos(out, specs):
    """The repositories alone, DIR/<variant>/simplenet (numpy and onnx only: no request, so no tritonclient or
    descriptor needed; tests/gpu/perf_analyzer_gpu.sh uses this)."""
    models = {}
    for spec in specs:
        parts = spec.split(":")
        big = parts[0] == "big"
        kind, prec, delay, count = parts[1:] if big else parts
        key = "big" if big else "seed"
        if key not in models:
            src = gbm.make_mlp("mlp_4x4096", 4096, [4096] * 4) if big else gbm.make_mlp("mlp_1024_512_10", 1024,
                                                                                        [512, 10])
            models[key] = renamed(src, "input", "output")
        d = os.path.join(out, spec.replace(":", "_"), "simplenet")
        os.makedirs(os.path.join(d, "1"), exist_ok=True)
        onnx.save(models[key], os.path.join(d, "1", "model.onnx"))
        dims = (4096, 4096) if big else (1024, 10)
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write(config(kind, prec, delay, count, *dims))


if __name__ == "__main__":
    main()
