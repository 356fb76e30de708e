"""tests/unit/engine/gen_test_models_device.py: the models of gen_test_models.py for the GPU plan's own
paths (host fallback, the CUDA paths of issue 34 item 3), written after every other model of that script
(its random generator's state included, so the weights above stay those the GPU tests' tolerances were set
for). gen_test_models.py calls write() with its helpers; not a script of its own.
"""
import numpy as np
from onnx import TensorProto, helper, numpy_helper


def write(model, compare, save, f32, vi, RNG):
    # --- host fallback (engine/cuda/plan_cuda_host.h): ops with no CUDA path run on the host inside a GPU
    # plan; test_gpu_plan compares them with the CPU plan in every mode (graphs, FP16, NHWC...) and counts
    # the host nodes (test_gpu_plan_ops.c test_host_fallback). After the CSE model so that the random
    # weights above stay as they were. Each host node sits between CUDA ops, at the graph's input or
    # output, or feeds another host node.
    # DFT between CUDA ops: Mul -> DFT (real signal along axis 1) -> Mul
    nodes = [helper.make_node("Mul", ["x", "s"], ["xs"], name="pre_mul"),
             helper.make_node("DFT", ["xs"], ["f"], name="dft", axis=1),
             helper.make_node("Mul", ["f", "s2"], ["y"], name="post_mul")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 8, 1])], [vi("y", TensorProto.FLOAT, ["N", 8, 2])],
              [numpy_helper.from_array(np.array(0.5, np.float32), "s"),
               numpy_helper.from_array(np.array([2.0, -1.0], np.float32), "s2")])
    compare(m, "host_dft", {"x": f32(3, 8, 1)}, rtol=1e-4)
    # LSTM between CUDA ops (onnxruntime runs sequence-first only): MatMul -> Transpose -> LSTM -> Transpose
    # for Y, Transpose -> Tanh for Y_h
    hid, inp = 4, 6
    nodes = [helper.make_node("MatMul", ["x", "wp"], ["xp"], name="proj"),
             helper.make_node("Transpose", ["xp"], ["xt"], name="to_seq", perm=[1, 0, 2]),
             helper.make_node("LSTM", ["xt", "W", "R", "B"], ["Ys", "Y_h"], name="lstm", hidden_size=hid),
             helper.make_node("Transpose", ["Ys"], ["Y"], name="to_batch", perm=[2, 0, 1, 3]),
             helper.make_node("Transpose", ["Y_h"], ["ht"], name="h_batch", perm=[1, 0, 2]),
             helper.make_node("Tanh", ["ht"], ["h"], name="tanh_h")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 5, 3])],
              [vi("Y", TensorProto.FLOAT, ["N", 5, 1, hid]), vi("h", TensorProto.FLOAT, ["N", 1, hid])],
              [numpy_helper.from_array(f32(3, inp), "wp"),
               numpy_helper.from_array(f32(1, 4 * hid, inp) * 0.5, "W"),
               numpy_helper.from_array(f32(1, 4 * hid, hid) * 0.5, "R"),
               numpy_helper.from_array(f32(1, 8 * hid) * 0.1, "B")], opset=14)
    compare(m, "host_lstm", {"x": f32(3, 5, 3)}, rtol=1e-4)
    # LpNormalization on the graph input (a host node at the input), then Relu; a second one between CUDA ops
    nodes = [helper.make_node("LpNormalization", ["x"], ["xs"], name="lpnorm_in", axis=1, p=2),
             helper.make_node("Relu", ["xs"], ["r"], name="relu"),
             helper.make_node("LpNormalization", ["r"], ["r2"], name="lpnorm_mid", axis=1, p=1),
             helper.make_node("Add", ["r2", "b"], ["y"], name="add_b")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 6])], [vi("y", TensorProto.FLOAT, ["N", 6])],
              [numpy_helper.from_array(f32(6), "b")], opset=16)
    compare(m, "host_lpnorm", {"x": f32(3, 6)})
    # Einsum between CUDA ops: Relu -> Einsum with a constant -> Sigmoid
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Einsum", ["r", "w"], ["e"], name="einsum", equation="bij,jk->bik"),
             helper.make_node("Sigmoid", ["e"], ["y"], name="sigmoid")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 4, 3])], [vi("y", TensorProto.FLOAT, ["N", 4, 5])],
              [numpy_helper.from_array(f32(3, 5), "w")])
    compare(m, "host_einsum", {"x": f32(3, 4, 3)})
    # A host node feeding a host node, at the graph's input and output: DFT -> Einsum -> y (one round trip),
    # with a CUDA branch reading the DFT's output too (it goes up once)
    nodes = [helper.make_node("DFT", ["x"], ["f"], name="dft_in", axis=1),
             helper.make_node("Einsum", ["f", "w"], ["y"], name="einsum_out", equation="bfc,cd->bfd"),
             helper.make_node("Abs", ["f"], ["a"], name="abs_side")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 8, 1])],
              [vi("y", TensorProto.FLOAT, ["N", 8, 3]), vi("a", TensorProto.FLOAT, ["N", 8, 2])],
              [numpy_helper.from_array(f32(2, 3), "w")])
    compare(m, "host_chain", {"x": f32(3, 8, 1)}, rtol=1e-4)

    # --- CUDA paths added for issue 34 item 3 (test_gpu_plan_ops.c test_device_paths): Mod on floats in both
    # fmod modes and on int64, CastLike from int64 to a float template; none may fall back to the host. Saved,
    # not compared: onnxruntime runs float Mod with fmod=1 only (test_gpu_plan compares with the CPU plan).
    # Divisors past the inputs' range [-2, 2) keep FP16 plans clear of Mod's jumps (only 0, whose sign
    # rounding keeps).
    nodes = [helper.make_node("Mod", ["x", "d"], ["m0"], name="mod_floor", fmod=0),
             helper.make_node("Mod", ["x", "d"], ["m1"], name="mod_c", fmod=1),
             helper.make_node("Mod", ["k", "kd"], ["mk"], name="mod_int"),
             helper.make_node("CastLike", ["k", "like"], ["kf"], name="castlike"),
             helper.make_node("Mul", ["kf", "half"], ["y"], name="scale")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 6]), vi("k", TensorProto.INT64, ["N", 4])],
              [vi("m0", TensorProto.FLOAT, ["N", 6]), vi("m1", TensorProto.FLOAT, ["N", 6]),
               vi("mk", TensorProto.INT64, ["N", 4]), vi("y", TensorProto.FLOAT, ["N", 4])],
              [numpy_helper.from_array(np.array([3, -2.5, 4, -3, 2.5, 5], np.float32), "d"),
               numpy_helper.from_array(np.array([3, -2, 4, -5], np.int64), "kd"),
               numpy_helper.from_array(np.array([1], np.float32), "like"),
               numpy_helper.from_array(np.array(0.5, np.float32), "half")], opset=15)
    save(m, "cuda_mod_castlike")
    # Slice on the device (k_slice_cuda): steps of both signs with a negative start and an end past the
    # front, and starts computed from the input's shape (Shape -> Gather -> Div, folded per signature)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Slice", ["r", "st1", "en1", "ax1", "sp1"], ["y1"], name="slice_steps"),
             helper.make_node("Shape", ["x"], ["sh"], name="shape"),
             helper.make_node("Gather", ["sh", "i2"], ["d2"], name="dim2"),
             helper.make_node("Div", ["d2", "two"], ["hf"], name="half_dim"),
             helper.make_node("Unsqueeze", ["hf", "ax0"], ["st2"], name="starts"),
             helper.make_node("Slice", ["r", "st2", "en2", "ax2"], ["y2"], name="slice_shape")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 6, 8])],
              [vi("y1", TensorProto.FLOAT, ["N", 2, 3]), vi("y2", TensorProto.FLOAT, ["N", 6, 4])],
              [numpy_helper.from_array(np.array([1, -1], np.int64), "st1"),
               numpy_helper.from_array(np.array([5, -9], np.int64), "en1"),
               numpy_helper.from_array(np.array([1, 2], np.int64), "ax1"),
               numpy_helper.from_array(np.array([2, -3], np.int64), "sp1"),
               numpy_helper.from_array(np.array(2, np.int64), "i2"),
               numpy_helper.from_array(np.array(2, np.int64), "two"),
               numpy_helper.from_array(np.array([0], np.int64), "ax0"),
               numpy_helper.from_array(np.array([100], np.int64), "en2"),
               numpy_helper.from_array(np.array([2], np.int64), "ax2")])
    compare(m, "slice_device", {"x": f32(2, 6, 8)})

    # --- InstanceNormalization and GroupNormalization on the device (k_group_norm_cuda; issue 34 item 3):
    # compared with onnxruntime here (the CPU plan in test_plan), with the CPU plan in every GPU plan mode
    # (test_gpu_plan), and on the device with no host node (test_gpu_plan_ops.c test_device_paths).
    # norm_instance: rank 4 between CUDA ops (Mul -> InstanceNormalization -> Relu), rank 3 and rank 5 at
    # the graph's input and output, epsilon 1e-3 on one.
    nodes = [helper.make_node("Mul", ["x", "s"], ["xs"], name="pre_mul"),
             helper.make_node("InstanceNormalization", ["xs", "sc4", "b4"], ["n4"], name="inorm4", epsilon=1e-3),
             helper.make_node("Relu", ["n4"], ["y"], name="relu"),
             helper.make_node("InstanceNormalization", ["z", "sc3", "b3"], ["y3"], name="inorm3"),
             helper.make_node("InstanceNormalization", ["w", "sc2", "b2"], ["y5"], name="inorm5")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 4, 5, 6]), vi("z", TensorProto.FLOAT, ["N", 3, 7]),
                      vi("w", TensorProto.FLOAT, ["N", 2, 3, 4, 5])],
              [vi("y", TensorProto.FLOAT, ["N", 4, 5, 6]), vi("y3", TensorProto.FLOAT, ["N", 3, 7]),
               vi("y5", TensorProto.FLOAT, ["N", 2, 3, 4, 5])],
              [numpy_helper.from_array(np.array(1.5, np.float32), "s"),
               numpy_helper.from_array(f32(4) + 1, "sc4"), numpy_helper.from_array(f32(4), "b4"),
               numpy_helper.from_array(f32(3) + 1, "sc3"), numpy_helper.from_array(f32(3), "b3"),
               numpy_helper.from_array(f32(2) + 1, "sc2"), numpy_helper.from_array(f32(2), "b2")])
    compare(m, "norm_instance", {"x": f32(3, 4, 5, 6), "z": f32(3, 3, 7), "w": f32(3, 2, 3, 4, 5)})
    # norm_group18: GroupNormalization-18 (scale and bias per group: 3 groups of 2 channels), then Relu; the
    # op set deprecates it, so the checker refuses it, but exporters wrote it and onnxruntime runs it
    nodes = [helper.make_node("GroupNormalization", ["x", "gs", "gb"], ["n"], name="gnorm18", num_groups=3),
             helper.make_node("Relu", ["n"], ["y"], name="relu")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 6, 4, 4])], [vi("y", TensorProto.FLOAT, ["N", 6, 4, 4])],
              [numpy_helper.from_array(f32(3) + 1, "gs"), numpy_helper.from_array(f32(3), "gb")], opset=18)
    compare(m, "norm_group18", {"x": f32(3, 6, 4, 4)}, check=False)
    # norm_group21: GroupNormalization-21 (scale and bias per channel, stash_type given): 4 groups of 2 over 9x9
    nodes = [helper.make_node("GroupNormalization", ["x", "cs", "cb"], ["y"], name="gnorm21", num_groups=4,
                              epsilon=1e-4, stash_type=1)]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 8, 9, 9])], [vi("y", TensorProto.FLOAT, ["N", 8, 9, 9])],
              [numpy_helper.from_array(f32(8) + 1, "cs"), numpy_helper.from_array(f32(8), "cb")], opset=21)
    m.ir_version = 10
    compare(m, "norm_group21", {"x": f32(3, 8, 9, 9)})
    # norm_group_big: one group of 4 channels over 64x64 (16384 elements: the device cuts it into chunks over
    # several blocks), the input offset by 2 (the mean away from 0; FP16 plans round the sum to half, so not
    # further). Saved, not compared: onnxruntime takes the variance as E[x^2] - E[x]^2 in float, 1e-6 off
    # here (5e-5 at an offset of 20), where the CPU plan's double two-pass equals numpy's float64;
    # test_gpu_plan_ops.c compares the GPU plans with the CPU plan.
    nodes = [helper.make_node("Add", ["u", "off"], ["uo"], name="offset"),
             helper.make_node("GroupNormalization", ["uo", "us", "ub"], ["v"], name="gnorm_big", num_groups=1)]
    m = model(nodes, [vi("u", TensorProto.FLOAT, ["N", 4, 64, 64])], [vi("v", TensorProto.FLOAT, ["N", 4, 64, 64])],
              [numpy_helper.from_array(np.array(2.0, np.float32), "off"),
               numpy_helper.from_array(f32(4) + 1, "us"), numpy_helper.from_array(f32(4), "ub")], opset=21)
    m.ir_version = 10
    save(m, "norm_group_big")

    # TopK, ArgMax and ArgMin on the device (kernels/reduce/k_arg.cu; test_gpu_plan_ops.c test_device_paths): on
    # small integers (ties everywhere, so the tie rules are compared; exact in FP16 plans too), cast to float or
    # int32: TopK along the last axis (largest) and a strided one (smallest, its Indices read by no one), ArgMax
    # with select_last_index and no keepdims, ArgMin along the last axis keeping it
    nodes = [helper.make_node("Cast", ["k"], ["kf"], name="to_float", to=TensorProto.FLOAT),
             helper.make_node("Cast", ["k"], ["ki"], name="to_int32", to=TensorProto.INT32),
             helper.make_node("TopK", ["kf", "k3"], ["tv", "ti"], name="topk_last", axis=-1, largest=1),
             helper.make_node("TopK", ["ki", "k4"], ["tv2", "ti2_unused"], name="topk_mid", axis=1, largest=0),
             helper.make_node("ArgMax", ["kf"], ["am"], name="argmax", axis=1, keepdims=0, select_last_index=1),
             helper.make_node("ArgMin", ["ki"], ["an"], name="argmin", axis=2, keepdims=1),
             helper.make_node("Add", ["tv", "x"], ["y"], name="add_x")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 6, 3]), vi("k", TensorProto.INT64, ["N", 6, 5])],
              [vi("y", TensorProto.FLOAT, ["N", 6, 3]), vi("ti", TensorProto.INT64, ["N", 6, 3]),
               vi("tv2", TensorProto.INT32, ["N", 4, 5]), vi("am", TensorProto.INT64, ["N", 5]),
               vi("an", TensorProto.INT64, ["N", 6, 1])],
              [numpy_helper.from_array(np.array([3], np.int64), "k3"),
               numpy_helper.from_array(np.array([4], np.int64), "k4")], opset=13)
    compare(m, "cuda_select", {"x": f32(3, 6, 3), "k": RNG.integers(0, 5, (3, 6, 5)).astype(np.int64)})
    # ScatterElements and ScatterND on the device (kernels/index/k_scatter.cu): indices from a graph input (the
    # GPU plan test draws them from [0, 5), duplicates included: both plans apply them in order), reductions
    # none, add (FP32, order-dependent rounding), max, and mul on int64 (atomic); ScatterND along the data's
    # second axis (transposed to the first) with a duplicate tuple under add. The feeds here have no duplicate
    # for reduction none (onnxruntime leaves their order open).
    nodes = [helper.make_node("ScatterElements", ["x", "ids", "u"], ["s_none"], name="scatter_none", axis=1),
             helper.make_node("ScatterElements", ["x", "ids", "u"], ["s_add"], name="scatter_add", axis=1,
                              reduction="add"),
             helper.make_node("ScatterElements", ["x", "ids", "u"], ["s_max"], name="scatter_max", axis=-1,
                              reduction="max"),
             # data apart from the indices: the planner may run a scatter in place on its data (ENG_OP_INPLACE),
             # which must not be the buffer the indices are read from
             helper.make_node("Add", ["ids", "one"], ["ids1"], name="ids_plus_one"),
             helper.make_node("ScatterElements", ["ids1", "ids", "ids"], ["s_mul"], name="scatter_mul", axis=1,
                              reduction="mul"),
             helper.make_node("Transpose", ["x"], ["xt"], name="xt", perm=[1, 0]),
             helper.make_node("Slice", ["u", "s0", "s3", "s1"], ["u3"], name="u3"),
             helper.make_node("Transpose", ["u3"], ["ut"], name="ut", perm=[1, 0]),
             helper.make_node("ScatterND", ["xt", "nd", "ut"], ["nd_add"], name="scatter_nd_add", reduction="add"),
             helper.make_node("ScatterND", ["xt", "nd2", "ut"], ["nd_none"], name="scatter_nd_none"),
             helper.make_node("Transpose", ["nd_add"], ["y_add"], name="back_add", perm=[1, 0]),
             helper.make_node("Transpose", ["nd_none"], ["y_none"], name="back_none", perm=[1, 0])]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 6]), vi("ids", TensorProto.INT64, ["N", 6]),
                      vi("u", TensorProto.FLOAT, ["N", 6])],
              [vi("s_none", TensorProto.FLOAT, ["N", 6]), vi("s_add", TensorProto.FLOAT, ["N", 6]),
               vi("s_max", TensorProto.FLOAT, ["N", 6]), vi("s_mul", TensorProto.INT64, ["N", 6]),
               vi("y_add", TensorProto.FLOAT, ["N", 6]), vi("y_none", TensorProto.FLOAT, ["N", 6])],
              [numpy_helper.from_array(np.array([0], np.int64), "s0"),
               numpy_helper.from_array(np.array(1, np.int64), "one"),
               numpy_helper.from_array(np.array([3], np.int64), "s3"),
               numpy_helper.from_array(np.array([1], np.int64), "s1"),
               numpy_helper.from_array(np.array([[1], [4], [1]], np.int64), "nd"),
               numpy_helper.from_array(np.array([[0], [5], [-4]], np.int64), "nd2")], opset=18)
    compare(m, "cuda_scatter", {"x": f32(3, 6), "ids": np.stack([RNG.permutation(6) for _ in range(3)]).astype(np.int64),
                                "u": f32(3, 6)})

    # --- issue 34's CUDA paths for what GPU plans refused per request (test_gpu_plan_ops.c test_issue34_paths:
    # every node on the device, no host node, against the CPU plan): MVN's ReduceMean over axes 0, 2, 3 and a
    # ReduceL2 over 1, 3 (not one run), Clip of INT8 with both bounds, a min only and none, Pow of FP32 by
    # INT32 and of INT32 by FP32 (and Abs of INT32), ReduceMax and ReduceMin of BOOL, and reductions of an
    # empty set (a Slice to no columns: Sum 0, Prod 1, Max and LogSumExp -inf). k holds small integers (-6..6).
    def axes(name, v):
        return numpy_helper.from_array(np.array(v, np.int64), name)
    nodes = [helper.make_node("ReduceMean", ["x", "ax023"], ["mean"], name="mvn_mean"),
             helper.make_node("Sub", ["x", "mean"], ["y_mvn"], name="mvn_sub"),
             helper.make_node("ReduceL2", ["x", "ax13"], ["y_l2"], name="l2_13"),
             helper.make_node("Cast", ["k"], ["k8"], name="to_int8", to=TensorProto.INT8),
             helper.make_node("Clip", ["k8", "lo8", "hi8"], ["y_clip"], name="clip_both"),
             helper.make_node("Clip", ["k8", "lo8"], ["y_clip_lo"], name="clip_lo"),
             helper.make_node("Clip", ["k8"], ["y_clip_none"], name="clip_none"),
             helper.make_node("Cast", ["k"], ["kf"], name="to_float", to=TensorProto.FLOAT),
             helper.make_node("Cast", ["k"], ["ki"], name="to_int32", to=TensorProto.INT32),
             helper.make_node("Pow", ["kf", "e_i32"], ["y_pow_f"], name="pow_f_by_i"),
             # |k| first (an integer Abs on the device): a negative base to a fractional power is NaN, which
             # onnxruntime casts to INT_MIN and k_cast to 0
             helper.make_node("Abs", ["ki"], ["kia"], name="abs_int"),
             helper.make_node("Pow", ["kia", "e_f32"], ["y_pow_i"], name="pow_i_by_f"),
             helper.make_node("Greater", ["kf", "zero"], ["pos"], name="positive"),
             helper.make_node("ReduceMax", ["pos", "ax1"], ["y_any"], name="any_pos"),
             helper.make_node("ReduceMin", ["pos", "ax1"], ["y_all"], name="all_pos"),
             helper.make_node("Slice", ["kf", "s0", "s0", "ax1"], ["none"], name="no_columns"),
             helper.make_node("ReduceSum", ["none", "ax1"], ["y_e_sum"], name="empty_sum"),
             helper.make_node("ReduceProd", ["none", "ax1"], ["y_e_prod"], name="empty_prod"),
             helper.make_node("ReduceMax", ["none", "ax1"], ["y_e_max"], name="empty_max"),
             helper.make_node("ReduceLogSumExp", ["none", "ax1"], ["y_e_lse"], name="empty_lse")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 4, 5]), vi("k", TensorProto.INT64, ["N", 6])],
              [vi("y_mvn", TensorProto.FLOAT, ["N", 3, 4, 5]), vi("y_l2", TensorProto.FLOAT, ["N", 1, 4, 1]),
               vi("y_clip", TensorProto.INT8, ["N", 6]), vi("y_clip_lo", TensorProto.INT8, ["N", 6]),
               vi("y_clip_none", TensorProto.INT8, ["N", 6]), vi("y_pow_f", TensorProto.FLOAT, ["N", 6]),
               vi("y_pow_i", TensorProto.INT32, ["N", 6]), vi("y_any", TensorProto.BOOL, ["N", 1]),
               vi("y_all", TensorProto.BOOL, ["N", 1]), vi("y_e_sum", TensorProto.FLOAT, ["N", 1]),
               vi("y_e_prod", TensorProto.FLOAT, ["N", 1]), vi("y_e_max", TensorProto.FLOAT, ["N", 1]),
               vi("y_e_lse", TensorProto.FLOAT, ["N", 1])],
              [axes("ax023", [0, 2, 3]), axes("ax13", [1, 3]), axes("ax1", [1]), axes("s0", [0]),
               numpy_helper.from_array(np.array(-2, np.int8), "lo8"), numpy_helper.from_array(np.array(3, np.int8), "hi8"),
               numpy_helper.from_array(np.array([2, 3, 1, 0, 1, 2], np.int32), "e_i32"),
               numpy_helper.from_array(np.array([2, 0.5, 1, 3, 0, 1.5], np.float32), "e_f32"),
               numpy_helper.from_array(np.array(0, np.float32), "zero")], opset=20)
    m.ir_version = 9
    compare(m, "cuda_issue34", {"x": f32(3, 3, 4, 5), "k": RNG.integers(-6, 7, (3, 6)).astype(np.int64)})
