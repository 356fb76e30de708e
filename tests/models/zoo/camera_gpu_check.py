#!/usr/bin/env python3
"""The camera models (camera.py: UINT8 NHWC frames, FP16 planes) on the GPU machine, where
tritonclient and onnxruntime may be missing: one inferd serves each model twice, with a config.pbtxt
holding only `instance_group [{ kind: KIND_GPU }]` and only `... KIND_CPU` (both auto-completed to
max_batch_size 4), and the same requests (1, 3 and 4 rows) go to both over raw gRPC; the CPU plan is
what CI checks against onnxruntime (test_zoo.py), so agreement carries that check to the GPU.

    python camera_gpu_check.py BUNDLE OUT_DIR
BUNDLE: tests/bench/vision/served/bundle.sh's folder (bin/inferd, kserve_min.desc, lib/ unpacked,
on LD_LIBRARY_PATH with cuDNN). Needs numpy, onnx, grpcio, protobuf. Exit 1 on any disagreement.
"""

import os
import re
import subprocess
import sys
import time

import grpc
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import camera  # noqa: E402

RTOL = 2e-3  # normwise: cuDNN and oneDNN sum in other orders; FP16 logits round once more
WIRE = {np.uint8: "UINT8", np.float16: "FP16"}


def write_repo(repo):
    camera.write_repo(repo)
    for n in camera.MODELS:
        for kind in ("gpu", "cpu"):
            d = os.path.join(repo, "%s_%s" % (n, kind))
            os.makedirs(os.path.join(d, "1"), exist_ok=True)
            dst = os.path.join(d, "1", "model.onnx")
            if not os.path.exists(dst):
                os.link(os.path.join(repo, n, "1", "model.onnx"), dst)
            with open(os.path.join(d, "config.pbtxt"), "w") as f:
                f.write("instance_group [{ kind: KIND_%s }]\n" % kind.upper())


def start(bundle, repo, log_path):
    log = open(log_path, "w")
    p = subprocess.Popen([os.path.join(bundle, "bin", "inferd"), "--model-repository", repo, "--grpc-port", "0",
                          "--http-port", "0"], stdout=subprocess.DEVNULL, stderr=log)
    for _ in range(1500):
        m = re.search(r"inferd ready: grpc=(\d+)", open(log_path).read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.2)
    raise SystemExit("inferd did not start:\n" + open(log_path).read()[-3000:])


def main():
    bundle, out = sys.argv[1], sys.argv[2]
    repo = os.path.join(out, "camera_repo")
    write_repo(repo)
    log_path = os.path.join(out, "camera_inferd.log")
    p, port = start(bundle, repo, log_path)
    pool = descriptor_pool.DescriptorPool()
    with open(os.path.join(bundle, "kserve_min.desc"), "rb") as f:
        for fd in descriptor_pb2.FileDescriptorSet.FromString(f.read()).file:
            pool.Add(fd)
    Req = message_factory.GetMessageClass(pool.FindMessageTypeByName("inference.ModelInferRequest"))
    Resp = message_factory.GetMessageClass(pool.FindMessageTypeByName("inference.ModelInferResponse"))
    call = grpc.insecure_channel("127.0.0.1:%d" % port).unary_unary(
        "/inference.GRPCInferenceService/ModelInfer", request_serializer=Req.SerializeToString,
        response_deserializer=Resp.FromString)
    rng = np.random.default_rng(0)
    bad = 0
    try:
        for n, (_, inp, dt, _, odt) in camera.MODELS.items():
            for rows in (1, 3, 4):
                x = camera.images(n, rng, rows)
                ys = {}
                for kind in ("gpu", "cpu"):
                    r = Req(model_name="%s_%s" % (n, kind))
                    t = r.inputs.add()
                    t.name, t.datatype = inp, WIRE[dt]
                    t.shape.extend(x.shape)
                    r.raw_input_contents.append(x.tobytes())
                    try:
                        resp = call(r, timeout=120)
                        ys[kind] = np.frombuffer(resp.raw_output_contents[0], odt).reshape(list(resp.outputs[0].shape))
                    except grpc.RpcError as ex:
                        print("FAIL %s_%s rows=%d: %s %s" % (n, kind, rows, ex.code(), ex.details()))
                if len(ys) < 2:
                    bad += 1
                    continue
                g, c = ys["gpu"].astype(np.float64), ys["cpu"].astype(np.float64)
                d = np.max(np.abs(g - c)) / max(np.max(np.abs(c)), 1e-30)
                ok = g.shape == c.shape == (rows, camera.CLASSES) and d <= RTOL
                bad += not ok
                print("%s %s rows=%d: GPU vs CPU normwise %.1e (max |y| %.2f)" % ("ok  " if ok else "FAIL", n, rows, d,
                                                                                np.max(np.abs(c))))
    finally:
        p.terminate()
        p.wait()
    if bad:
        print(open(log_path).read()[-2000:])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
