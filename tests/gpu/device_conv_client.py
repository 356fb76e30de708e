"""One KServe v2 gRPC request per KIND_GPU conv model (device_plan_run.sh):
conv_resnet's and conv_transpose_net's generated inputs against
onnxruntime's outputs for them, at fp32 and fp16."""
import sys

import numpy as np
import tritonclient.grpc as grpcclient

import device_client

url, models = sys.argv[1], sys.argv[2]
c = device_client.ready_client(url)


def case_shapes(name):
    """The generated case's input and output shapes (NAME.case: "in|out <type> <rank> <dims...>")."""
    ins, outs = [], []
    for line in open("%s/%s.case" % (models, name)):
        f = line.split()
        (ins if f[0] == "in" else outs).append([int(v) for v in f[3:3 + int(f[2])]])
    return ins, outs


# model: its outputs' names, in the graph's order
MODELS = {"conv_resnet": ["y"], "conv_transpose_net": ["y", "z"]}
bad = 0
for model, out_names in MODELS.items():
    ins, outs = case_shapes(model)
    x = np.fromfile("%s/%s.in0.bin" % (models, model), np.float32).reshape(ins[0])
    for prec, rtol in (("fp32", 1e-4), ("fp16", 1e-2)):
        name = "%s_%s" % (model, prec)
        ready = c.is_model_ready(name)
        if not ready:
            print(name, "not ready:", c.get_model_repository_index())
            bad += 1
            continue
        inp = grpcclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        r = c.infer(name, [inp])
        for j, out in enumerate(out_names):
            want = np.fromfile("%s/%s.out%d.bin" % (models, model, j), np.float32).reshape(outs[j])
            y = r.as_numpy(out)
            err = np.abs(y - want).max() / (np.abs(want).mean() + 1e-30)
            ok = y.shape == want.shape and err <= rtol
            print("%s %s: output %s, max |diff| / mean |ref| = %.3g (bound %g): %s" % (
                name, out, y.shape, err, rtol, "ok" if ok else "BAD"))
            bad += not ok
sys.exit(1 if bad else 0)
