"""One KServe v2 gRPC request per KIND_GPU conv model (device_plan_run.sh):
conv_resnet's generated input against onnxruntime's output for it."""
import sys
import time

import numpy as np
import tritonclient.grpc as grpcclient

url, models = sys.argv[1], sys.argv[2]
c = grpcclient.InferenceServerClient(url)
for _ in range(600):
    try:
        if c.is_server_ready():
            break
    except Exception:
        pass
    time.sleep(0.1)
x = np.fromfile(models + "/conv_resnet.in0.bin", np.float32).reshape(2, 3, 10, 10)
want = np.fromfile(models + "/conv_resnet.out0.bin", np.float32).reshape(2, 16, 5, 5)
bad = 0
for name, rtol in (("conv_resnet_fp32", 1e-4), ("conv_resnet_fp16", 1e-2)):
    ready = c.is_model_ready(name)
    if not ready:
        print(name, "not ready:", c.get_model_repository_index())
        bad += 1
        continue
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    r = c.infer(name, [inp])
    y = r.as_numpy("y")
    err = np.abs(y - want).max() / (np.abs(want).mean() + 1e-30)
    ok = y.shape == want.shape and err <= rtol
    print("%s: output %s, max |diff| / mean |ref| = %.3g (bound %g): %s" % (name, y.shape, err, rtol,
                                                                           "ok" if ok else "BAD"))
    bad += not ok
sys.exit(1 if bad else 0)
