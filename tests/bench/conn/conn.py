"""Helpers of tests/bench/conn/run.sh (one HTTP/2 connection carrying big messages, issue 32).

  conn.py models DIR        a repository of two trivial CPU models with the tensor sizes of ResNet-50
                            and BERT-base s128, so the transport and not the compute is measured:
                              bigin:  input FP32 [-1,3,224,224] (602,112 bytes a row) -> its first
                                      1000 values, output FP32 [-1,1000] (4 KB)
                              bigout: input_ids INT64 [-1,128] (1 KB) -> Cast, broadcast to
                                      output FP32 [-1,128,768] (393,216 bytes a row)
  conn.py req MODEL FILE    a serialized ModelInferRequest of one row for MODEL (loadc's REQFILE)
  conn.py reply MODEL       the size in bytes of inferd's serialized answer to that request
  conn.py pa FILE           perf_analyzer's CSV (-f) -> "rps" of its last row
"""
import os
import sys

import numpy as np

SHAPES = {"bigin": ("input", "FP32", (3, 224, 224), "output", (1000,)),
          "bigout": ("input_ids", "INT64", (128,), "output", (128, 768))}


def models(d):
    import onnx
    from onnx import TensorProto, helper
    # bigin: Flatten (a view) and the first 1000 values: touching the whole image (a ReduceMean) cost
    # more CPU than the transport on the dev VM
    n = [helper.make_node("Flatten", ["input"], ["flat"], axis=1),
         helper.make_node("Slice", ["flat", "st", "en", "ax1"], ["output"])]
    g = helper.make_graph(n, "bigin", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 224, 224])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 1000])],
                          [helper.make_tensor("st", TensorProto.INT64, [1], [0]),
                           helper.make_tensor("en", TensorProto.INT64, [1], [1000]),
                           helper.make_tensor("ax1", TensorProto.INT64, [1], [1])])
    write(d, "bigin", helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
          'input [{ name: "input" data_type: TYPE_FP32 dims: [3, 224, 224] }]\n'
          'output [{ name: "output" data_type: TYPE_FP32 dims: [1000] }]\n')
    # bigout: Cast to FP32, Unsqueeze to [-1,128,1], Expand to [-1,128,768]
    n = [helper.make_node("Cast", ["input_ids"], ["f"], to=TensorProto.FLOAT),
         helper.make_node("Unsqueeze", ["f", "ax2"], ["f1"]),
         helper.make_node("Expand", ["f1", "shp"], ["output"])]
    g = helper.make_graph(n, "bigout", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["N", 128])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 128, 768])],
                          [helper.make_tensor("ax2", TensorProto.INT64, [1], [2]),
                           helper.make_tensor("shp", TensorProto.INT64, [3], [1, 1, 768])])
    write(d, "bigout", helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
          'input [{ name: "input_ids" data_type: TYPE_INT64 dims: [128] }]\n'
          'output [{ name: "output" data_type: TYPE_FP32 dims: [128, 768] }]\n')


def write(d, name, model, io):
    import onnx
    os.makedirs(os.path.join(d, name, "1"), exist_ok=True)
    onnx.save(model, os.path.join(d, name, "1", "model.onnx"))
    with open(os.path.join(d, name, "config.pbtxt"), "w") as f:
        # batched like the real models' configs, with no queue delay: the transport is measured
        f.write('name: "%s"\nbackend: "onnxruntime"\nmax_batch_size: 64\n%s'
                'dynamic_batching { max_queue_delay_microseconds: 0 }\n'
                'instance_group [{ kind: KIND_CPU count: 1 }]\n' % (name, io))


def request(model):
    from tritonclient.grpc import service_pb2
    name, dt, dims, _, _ = SHAPES[model]
    rng = np.random.default_rng(1)
    a = (rng.random((1,) + dims, dtype=np.float32) if dt == "FP32"
         else rng.integers(0, 30000, (1,) + dims, dtype=np.int64))
    q = service_pb2.ModelInferRequest(model_name=model)
    t = q.inputs.add(name=name, datatype=dt)
    t.shape.extend(a.shape)
    q.raw_input_contents.append(a.tobytes())
    return q


def reply_size(model):
    from tritonclient.grpc import service_pb2
    _, _, _, out, dims = SHAPES[model]
    r = service_pb2.ModelInferResponse(model_name=model, model_version="1")
    t = r.outputs.add(name=out, datatype="FP32")
    t.shape.extend((1,) + dims)
    r.raw_output_contents.append(bytes(4 * int(np.prod(dims))))
    return r.ByteSize()


def main(argv):
    if argv[1] == "models":
        models(argv[2])
    elif argv[1] == "req":
        with open(argv[3], "wb") as f:
            f.write(request(argv[2]).SerializeToString())
    elif argv[1] == "reply":
        print(reply_size(argv[2]))
    elif argv[1] == "pa":
        import csv
        rows = list(csv.DictReader(open(argv[2])))
        print(round(float(rows[-1]["Inferences/Second"])) if rows else 0)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
