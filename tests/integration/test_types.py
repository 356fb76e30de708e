"""Element types through the real server (issue 33): Triton's own example models `simple` (INT32
Add and Sub on [16] tensors, max_batch_size 8) and `simple_int8` served as Triton serves them and
checked against onnxruntime over gRPC and HTTP; then one-node models for every (op, type) pair ONNX
defines among the elementwise ops (Add, Sub, Mul, Div, Mod both ways, Pow, Max, Min, the
comparisons, Neg, Abs, Sign, Clip, Where, Cast), checked against onnxruntime (numpy where
onnxruntime has no kernel for the pair), and ONNX's own conformance cases for those ops
(onnx.backend.test.case.node) against their expected outputs. All models load in one server.
"""

import importlib
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferd_testlib as lib

OPSET = 17

# --- Triton's example models


def simple_model(np_type, onnx_type):
    """Triton's `simple`: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, [batch, 16]."""
    vi = lambda n: helper.make_tensor_value_info(n, onnx_type, ["batch", 16])  # noqa: E731
    g = helper.make_graph([helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
                           helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
                          "simple", [vi("INPUT0"), vi("INPUT1")], [vi("OUTPUT0"), vi("OUTPUT1")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


# Where the CPU plan runs every pair: the instance kind is pinned (a GPU host would pick KIND_GPU);
# test_gpu_types below serves the same models on a GPU.
KIND = 'instance_group [ { kind: KIND_CPU } ]\n'


def simple_config(name, cfg_type, kind=None):
    return (kind if kind is not None else KIND) + """name: "%s"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: %s dims: [ 16 ] },
        { name: "INPUT1" data_type: %s dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: %s dims: [ 16 ] },
         { name: "OUTPUT1" data_type: %s dims: [ 16 ] } ]
""" % (name, cfg_type, cfg_type, cfg_type, cfg_type)


SIMPLE = {"simple": (np.int32, TensorProto.INT32, "TYPE_INT32"),
          "simple_int8": (np.int8, TensorProto.INT8, "TYPE_INT8")}

# --- the (op, type) grid

NUMERIC = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
           np.float16, np.float32, np.float64]
SIGNED = [np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]
FLOATS = [np.float16, np.float32, np.float64]
INTS = [t for t in NUMERIC if t not in FLOATS]

# op -> (types ONNX defines it for, node attributes)
GRID = {}
for op in ("Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual",
           "GreaterOrEqual", "Abs", "Sign", "Clip"):
    GRID[op] = (NUMERIC, {})
GRID["Equal"] = (NUMERIC + [np.bool_], {})
GRID["Mod"] = (NUMERIC, {"fmod": 0})  # floats: numpy's mod, as ONNX's reference and conformance cases
GRID["Mod_fmod"] = (NUMERIC, {"fmod": 1})
GRID["Pow"] = ([np.int32, np.int64] + FLOATS, {})
GRID["Neg"] = (SIGNED, {})
GRID["Relu"] = (SIGNED, {})
GRID["Where"] = (NUMERIC + [np.bool_], {})
GRID["CastTo"] = (NUMERIC + [np.bool_], {})    # Cast INT32 -> t
GRID["CastFrom"] = (NUMERIC + [np.bool_], {})  # Cast t -> INT32 (floats: exact integral values)
# the reductions and the shape/index ops an integer model uses
REDUCIBLE = [np.int8, np.uint8, np.int32, np.int64, np.uint32, np.uint64] + FLOATS
for op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"):
    GRID[op] = (REDUCIBLE, {})
GRID["CumSum"] = ([np.int32, np.int64, np.uint32, np.uint64] + FLOATS, {})
GRID["Range"] = ([np.int16, np.int32, np.int64, np.float32, np.float64], {})
GRID["Index"] = (NUMERIC + [np.bool_], {})
GRID["Pad"] = (NUMERIC + [np.bool_], {})  # Slice, Gather, Concat, Transpose, Reshape, Unsqueeze, Expand, Squeeze, Shape

UNARY = {"Abs", "Sign", "Neg", "Relu", "Clip", "CastTo", "CastFrom", "ReduceSum", "ReduceMax", "ReduceMin",
         "ReduceMean", "CumSum", "Index", "Pad"}
OUT_SHAPE = {"ReduceSum": [2], "ReduceMax": [2], "ReduceMin": [2], "ReduceMean": [2], "Range": [3], "Index": [2, 8], "Pad": [2, 5]}
CMP = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}

PAIRS = [(op, np.dtype(t).name) for op, (types, _) in GRID.items() for t in types]


def onnx_type(t):
    return helper.np_dtype_to_tensor_dtype(np.dtype(t))


def grid_name(op, tname):
    return "g_%s_%s" % (op.lower(), tname)


def grid_model(op, t):
    """One node over A [2, 3] (and B [3], broadcast; Where: C [2, 1] bool, Clip: scalar bounds)."""
    attrs = GRID[op][1]
    ot = onnx_type(t)
    vi = helper.make_tensor_value_info
    inputs, inits = [vi("A", ot, [2, 3])], []
    if op == "Where":
        inputs = [vi("C", TensorProto.BOOL, [2, 1]), vi("A", ot, [2, 3]), vi("B", ot, [3])]
        node = helper.make_node("Where", ["C", "A", "B"], ["Y"])
        out_t = ot
    elif op == "Clip":
        lo, hi = clip_bounds(t)
        inits = [onnx.numpy_helper.from_array(np.array(lo, t), "lo"), onnx.numpy_helper.from_array(np.array(hi, t), "hi")]
        node = helper.make_node("Clip", ["A", "lo", "hi"], ["Y"])
        out_t = ot
    elif op == "CastTo":
        inputs = [vi("A", TensorProto.INT32, [2, 3])]
        node = helper.make_node("Cast", ["A"], ["Y"], to=ot)
        out_t = ot
    elif op == "CastFrom":
        node = helper.make_node("Cast", ["A"], ["Y"], to=TensorProto.INT32)
        out_t = TensorProto.INT32
    elif op == "ReduceSum":  # axes an input from opset 13
        inits = [onnx.numpy_helper.from_array(np.array([1], np.int64), "ax")]
        node = helper.make_node(op, ["A", "ax"], ["Y"], keepdims=0)
        out_t = ot
    elif op.startswith("Reduce"):  # axes an attribute before opset 18
        node = helper.make_node(op, ["A"], ["Y"], axes=[1], keepdims=0)
        out_t = ot
    elif op == "Pad":  # one column of the constant each side
        inits = [onnx.numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads"),
                 onnx.numpy_helper.from_array(np.array(pad_value(t), t), "v")]
        node = helper.make_node("Pad", ["A", "pads", "v"], ["Y"])
        out_t = ot
    elif op == "CumSum":
        inits = [onnx.numpy_helper.from_array(np.array(1, np.int64), "ax")]
        node = helper.make_node(op, ["A", "ax"], ["Y"])
        out_t = ot
    elif op == "Range":  # folded when planning, then added to A: Y = A + Range(-2, 7, 3)
        inputs = [vi("A", ot, [3])]
        inits = [onnx.numpy_helper.from_array(np.array(v, t), n) for n, v in (("s", -2), ("l", 7), ("d", 3))]
        g = helper.make_graph([helper.make_node("Range", ["s", "l", "d"], ["R"]),
                               helper.make_node("Add", ["A", "R"], ["Y"])], "g", inputs, [vi("Y", ot, [3])], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    elif op == "Index":
        i64 = lambda n, v: onnx.numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
        inits = [i64("st", [0]), i64("en", [2]), i64("ax", [1]), i64("idx", [2, 0]), i64("shp", [8]),
                 i64("zero", [0]), i64("exp", [2, 8])]
        nodes = [helper.make_node("Slice", ["A", "st", "en", "ax"], ["S"]),        # [2, 2]
                 helper.make_node("Gather", ["A", "idx"], ["G"], axis=1),          # [2, 2]
                 helper.make_node("Concat", ["G", "S"], ["C"], axis=0),            # [4, 2]
                 helper.make_node("Transpose", ["C"], ["T"], perm=[1, 0]),         # [2, 4]
                 helper.make_node("Reshape", ["T", "shp"], ["R"]),                 # [8]
                 helper.make_node("Unsqueeze", ["R", "zero"], ["U"]),              # [1, 8]
                 helper.make_node("Expand", ["U", "exp"], ["E"]),                  # [2, 8]
                 helper.make_node("Unsqueeze", ["E", "zero"], ["E1"]),             # [1, 2, 8]
                 helper.make_node("Squeeze", ["E1", "zero"], ["Y"]),               # [2, 8]
                 helper.make_node("Shape", ["A"], ["Z"])]
        g = helper.make_graph(nodes, "g", inputs, [vi("Y", ot, [2, 8]), vi("Z", TensorProto.INT64, [2])], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    elif op in UNARY:
        node = helper.make_node(op, ["A"], ["Y"])
        out_t = ot
    else:
        inputs.append(vi("B", ot, [3]))
        node = helper.make_node(op.split("_")[0], ["A", "B"], ["Y"], **attrs)
        out_t = TensorProto.BOOL if op in CMP else ot
    g = helper.make_graph([node], "g", inputs, [vi("Y", out_t, OUT_SHAPE.get(op, [2, 3]))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def pad_value(t):
    return True if np.dtype(t) == np.bool_ else 7


def clip_bounds(t):
    return (-3, 5) if np.dtype(t).kind in "if" else (2, 100)


def grid_inputs(op, t, rng):
    """Values that reach each type's edges where the op's result stays defined: wraparound in Add,
    Sub and Mul, both signs in Div and Mod, no division by zero nor INT_MIN / -1 (undefined)."""
    t = np.dtype(t)
    if t == np.bool_:
        a, b = rng.integers(0, 2, (2, 3)).astype(bool), rng.integers(0, 2, 3).astype(bool)
    elif t.kind in "iu":
        info = np.iinfo(t)
        if op in ("Add", "Sub", "Mul", "Max", "Min", "Where") or op in CMP:
            a = np.array([[info.min, info.max, 0], [1, info.max - 1, 7]], t)
            b = np.array([info.max, 3, info.min + 1], t)
        elif op == "Pow":
            a = np.array([[2, -3, 5], [7, 1, -1]], t)
            b = np.array([0, 2, 3], t)
        else:
            lo = max(int(info.min) + 1, -100)
            a = rng.integers(lo, 100, (2, 3)).astype(t)
            a[0, 0] = info.min + 1 if t.kind == "i" else info.max
            b = np.array([7, -3 if t.kind == "i" else 3, 2], t)
        if op in ("CastFrom",):
            a = rng.integers(max(int(info.min), -1000), min(int(info.max), 1000), (2, 3)).astype(t)
    else:
        if op == "Pow":
            a, b = np.abs(rng.standard_normal((2, 3))).astype(t) + 0.5, np.array([0.5, 2, 3], t)
        elif op == "CastFrom":
            a = rng.integers(-1000, 1000, (2, 3)).astype(t)
        else:
            a = (rng.standard_normal((2, 3)) * 4).astype(t)
            b = np.array([1.5, -2.25, 3], t)
            if op in CMP:
                b[0] = a[0, 0]  # an equal pair
    if op == "CastTo":
        return {"A": rng.integers(-100, 100, (2, 3)).astype(np.int32)}
    if op == "Range":
        return {"A": np.array([1, 2, 3], t)}
    if op.startswith("Reduce") or op == "CumSum":  # small values of both signs: sums stay exact
        lo = -20 if t.kind in "if" else 0
        return {"A": rng.integers(lo, 20, (2, 3)).astype(t)}
    if op in UNARY:
        return {"A": a}
    if op == "Where":
        return {"C": np.array([[True], [False]]), "A": a, "B": b}
    return {"A": a, "B": b}


def numpy_ref(op, feeds):
    """ONNX's semantics where onnxruntime has no kernel: integers wrap in two's complement, Div
    truncates toward zero, Mod takes the divisor's sign (fmod=0) or the dividend's (fmod=1)."""
    a, b = feeds.get("A"), feeds.get("B")
    with np.errstate(over="ignore"):
        if op == "Add":
            return a + b
        if op == "Sub":
            return a - b
        if op == "Mul":
            return a * b
        if op == "Div":
            if a.dtype.kind in "iu":  # toward zero, in Python's exact integers
                bb = np.broadcast_to(b, a.shape)
                q = [abs(int(x)) // abs(int(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(a.flat, bb.flat)]
                return np.array(q).astype(a.dtype).reshape(a.shape)
            return a / b
        if op == "Mod":
            return np.mod(a, b)
        if op == "Mod_fmod":
            return np.fmod(a, b)
        if op == "Pow":
            return np.power(a, b)
        if op == "Max":
            return np.maximum(a, b)
        if op == "Min":
            return np.minimum(a, b)
        if op in CMP:
            return {"Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
                    "GreaterOrEqual": np.greater_equal}[op](a, b)
        if op == "Abs":
            return np.abs(a)
        if op == "Neg":
            return np.negative(a)
        if op == "Relu":
            return np.maximum(a, np.zeros((), a.dtype))
        if op == "Sign":
            return np.sign(a)
        if op == "Clip":
            lo, hi = clip_bounds(a.dtype)
            return np.clip(a, np.array(lo, a.dtype), np.array(hi, a.dtype))
        if op == "Where":
            return np.where(feeds["C"], a, b)
        if op in ("ReduceSum", "ReduceMax", "ReduceMin", "CumSum"):
            return {"ReduceSum": lambda x: np.sum(x, axis=1, dtype=x.dtype), "ReduceMax": lambda x: np.max(x, axis=1),
                    "ReduceMin": lambda x: np.min(x, axis=1),
                    "CumSum": lambda x: np.cumsum(x, axis=1, dtype=x.dtype)}[op](a)
        if op == "ReduceMean":
            if a.dtype.kind in "iu":  # the sum over the count, toward zero
                return np.array([int(v) for v in np.trunc(np.sum(a.astype(np.int64), axis=1) / a.shape[1])], a.dtype)
            return np.mean(a, axis=1).astype(a.dtype)
        if op == "Range":
            return a + np.arange(-2, 7, 3).astype(a.dtype)
        if op == "Pad":
            return np.pad(a, ((0, 0), (1, 1)), constant_values=np.array(pad_value(a.dtype), a.dtype))
        if op == "Index":
            c = np.concatenate([a[:, [2, 0]], a[:, 0:2]], axis=0)
            return np.broadcast_to(c.T.reshape(1, 8), (2, 8))
    raise AssertionError(op)


# --- ONNX's conformance cases for the same ops

CONFORMANCE_MODULES = ["add", "sub", "mul", "div", "mod", "pow", "max", "min", "equal", "less", "greater",
                       "less_or_equal", "greater_or_equal", "neg", "abs", "sign", "clip", "where", "and_",
                       "or_", "xor", "not_", "cast"]
SERVED_ONNX_TYPES = {TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16,
                     TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL,
                     TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.UINT32, TensorProto.UINT64}
CFG_TYPE = {TensorProto.FLOAT: "TYPE_FP32", TensorProto.UINT8: "TYPE_UINT8", TensorProto.INT8: "TYPE_INT8",
            TensorProto.UINT16: "TYPE_UINT16", TensorProto.INT16: "TYPE_INT16", TensorProto.INT32: "TYPE_INT32",
            TensorProto.INT64: "TYPE_INT64", TensorProto.BOOL: "TYPE_BOOL", TensorProto.FLOAT16: "TYPE_FP16",
            TensorProto.DOUBLE: "TYPE_FP64", TensorProto.UINT32: "TYPE_UINT32", TensorProto.UINT64: "TYPE_UINT64"}


def _tensor_io(vis):
    out = []
    for v in vis:
        tt = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        out.append((v.name, tt.elem_type, dims))
    return out


def conformance_cases():
    """{case name: (model, inputs, expected outputs)} of the node cases whose one node is one of our
    ops, on types a client can send (no strings, bfloat16, float8 or int4) and of rank >= 1. Only
    the modules of those ops are imported: collecting every case takes half a minute."""
    import onnx.backend.test.case.node as node_cases
    for m in CONFORMANCE_MODULES:
        importlib.import_module("onnx.backend.test.case.node." + m)  # registers its cases on import
    cases = {}
    for c in getattr(node_cases, "_NodeTestCases", []):
        g = c.model.graph
        if len(g.node) != 1 or not c.data_sets:
            continue
        io = _tensor_io(list(g.input) + list(g.output))
        if any(t not in SERVED_ONNX_TYPES or not dims or -1 in dims for _, t, dims in io):
            continue
        inputs, outputs = c.data_sets[0]
        arr = lambda v: onnx.numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)  # noqa: E731
        cases[c.name] = (c.model, [arr(v) for v in inputs], [arr(v) for v in outputs])
    return cases


CONFORMANCE = conformance_cases()


def write_model(repo, name, model, config):
    d = os.path.join(repo, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    onnx.save(model, os.path.join(d, "1", "model.onnx"))
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(config)


def plain_config(name, model, kind=None):
    """max_batch_size 0, every input and output as the graph declares it."""
    g = model.graph

    def entries(vis):
        return ",\n".join('  { name: "%s" data_type: %s dims: [ %s ] }' % (n, CFG_TYPE[t], ", ".join(map(str, dims)))
                          for n, t, dims in _tensor_io(vis))
    return (kind if kind is not None else KIND) + (
        'name: "%s"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 0\ninput [\n%s\n]\noutput [\n%s\n]\n' % (
            name, entries(g.input), entries(g.output)))


def conf_name(case):
    return "c_" + case[len("test_"):] if case.startswith("test_") else "c_" + case


@pytest.fixture(scope="module")
def types_repo(tmp_path_factory):
    repo = str(tmp_path_factory.mktemp("types_repo"))
    for name, (_, ot, cfg) in SIMPLE.items():
        write_model(repo, name, simple_model(None, ot), simple_config(name, cfg))
    for op, tname in PAIRS:
        m = grid_model(op, np.dtype(tname))
        write_model(repo, grid_name(op, tname), m, plain_config(grid_name(op, tname), m))
    for case, (m, _, _) in CONFORMANCE.items():
        write_model(repo, conf_name(case), m, plain_config(conf_name(case), m))
    # a pair ONNX does not define: Neg of an unsigned type fails to load, naming the type
    m = grid_model("Neg", np.int8)
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.elem_type = TensorProto.UINT8
    write_model(repo, "bad_neg_uint8", m, plain_config("bad_neg_uint8", m))
    return repo


@pytest.fixture(scope="module")
def types_server(types_repo):
    yield from lib.served(types_repo, ["--strict-readiness", "false"])


@pytest.fixture(scope="module")
def gclient(types_server):
    yield from lib.grpc_client(types_server)


@pytest.fixture(scope="module")
def hclient(types_server):
    import tritonclient.http as httpclient
    c = httpclient.InferenceServerClient(url="127.0.0.1:%d" % types_server.http_port)
    yield c
    c.close()


def infer_any(client, mod, model, feeds):
    from tritonclient.utils import np_to_triton_dtype
    inputs = []
    for name, arr in feeds.items():
        x = mod.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
        x.set_data_from_numpy(arr)
        inputs.append(x)
    return client.infer(model, inputs)


_ort = {}


def ort_run(model, feeds):
    """onnxruntime's outputs, or None where it has no kernel for the model's types."""
    import onnxruntime as ort
    key = model.SerializeToString()
    if key not in _ort:
        try:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            _ort[key] = ort.InferenceSession(key, opts, providers=["CPUExecutionProvider"])
        except Exception:  # NOT_IMPLEMENTED: no kernel registered for this type
            _ort[key] = None
    s = _ort[key]
    try:
        return None if s is None else s.run(None, feeds)
    except Exception:  # Mod with fmod=0 on floats: onnxruntime implements it from opset 28 only
        return None


def assert_values(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, "%s: shape %s, want %s" % (what, got.shape, want.shape)
    assert got.dtype == want.dtype, "%s: dtype %s, want %s" % (what, got.dtype, want.dtype)
    if got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        # FP16 and FP64 are computed in FP32 inside a plan (eng_ops_cpu_internal_dtype)
        rtol = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-6}[got.dtype.type]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol,
                                   equal_nan=True, err_msg=what)


# --- tests


@pytest.mark.parametrize("name", sorted(SIMPLE))
def test_triton_simple(types_server, gclient, hclient, name):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    np_t, ot, _ = SIMPLE[name]
    lib.require_ready(types_server, gclient, name)
    meta = gclient.get_model_metadata(name)
    assert [(i.name, i.datatype, list(i.shape)) for i in meta.inputs] == [
        ("INPUT0", np.dtype(np_t).name.upper(), [-1, 16]), ("INPUT1", np.dtype(np_t).name.upper(), [-1, 16])]
    rng = np.random.default_rng(lib.seed_from_env())
    info = np.iinfo(np_t)
    for batch in (1, 3, 8):
        # Triton's simple_grpc_infer_client sends arange and ones; also the type's edges, so Add and Sub wrap
        a = rng.integers(info.min, info.max, (batch, 16), endpoint=True).astype(np_t)
        b = rng.integers(info.min, info.max, (batch, 16), endpoint=True).astype(np_t)
        a[0] = np.arange(16, dtype=np_t)
        b[0] = np.ones(16, dtype=np_t)
        if batch > 1:
            a[-1, :2], b[-1, :2] = info.max, (1, info.min)
        want = ort_run(simple_model(np_t, ot), {"INPUT0": a, "INPUT1": b})
        assert want is not None, "onnxruntime runs %s" % name
        for mod, client in ((grpcclient, gclient), (httpclient, hclient)):
            res = infer_any(client, mod, name, {"INPUT0": a, "INPUT1": b})
            for k, o in enumerate(("OUTPUT0", "OUTPUT1")):
                assert_values(res.as_numpy(o), want[k], "%s %s batch %d via %s" % (name, o, batch, mod.__name__))
        # the first row is what Triton's example client prints: 0+1 .. 15+1 and 0-1 .. 15-1
        assert res.as_numpy("OUTPUT0")[0].tolist() == list(range(1, 17))
        assert res.as_numpy("OUTPUT1")[0].tolist() == list(range(-1, 15))


@pytest.mark.parametrize("op,tname", PAIRS, ids=["%s-%s" % p for p in PAIRS])
def test_op_type(types_server, gclient, op, tname):
    import tritonclient.grpc as grpcclient
    name = grid_name(op, tname)
    lib.require_ready(types_server, gclient, name)
    t = np.dtype(tname)
    rng = np.random.default_rng(lib.seed_from_env())
    feeds = grid_inputs(op, t, rng)
    model = grid_model(op, t)
    want = ort_run(model, feeds)
    want = want[0] if want is not None else numpy_ref(op, feeds)
    res = infer_any(gclient, grpcclient, name, feeds)
    assert_values(res.as_numpy("Y"), want, "%s on %s" % (op, tname))
    if op == "Index":
        assert res.as_numpy("Z").tolist() == [2, 3]


@pytest.mark.parametrize("case", sorted(CONFORMANCE))
def test_conformance(types_server, gclient, case):
    import tritonclient.grpc as grpcclient
    model, inputs, outputs = CONFORMANCE[case]
    name = conf_name(case)
    lib.require_ready(types_server, gclient, name)
    feeds = {vi.name: np.asarray(v) for vi, v in zip(model.graph.input, inputs)}
    res = infer_any(gclient, grpcclient, name, feeds)
    for vi, want in zip(model.graph.output, outputs):
        assert_values(res.as_numpy(vi.name), np.asarray(want), "%s %s" % (case, vi.name))


def test_undefined_pair_refused(types_server, gclient):
    """A model the kernels cannot run fails at load, naming the node and the type; the others serve."""
    assert not gclient.is_model_ready("bad_neg_uint8")
    types_server.await_stderr(lambda ls: any("bad_neg_uint8" in l and "op_type 'Neg'" in l and
                                             "unsupported element type UINT8" in l for l in ls))
    assert gclient.is_model_ready("simple")


# --- the same models on a GPU instance: every pair either answers the right values or is refused
# cleanly (the model fails to load naming the op, or the request fails with UNIMPLEMENTED naming the
# type): never a wrong answer. The pairs the CUDA plan has kernels for must answer.

GPU_KIND = 'instance_group [ { kind: KIND_GPU count: 1 } ]\n'
GPU_MUST = {op for op in ("Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual",
                          "GreaterOrEqual", "Where", "CastTo", "CastFrom", "Range")}


def _gpu_visible():
    import shutil
    import subprocess
    if os.environ.get("INFERD_TEST_GPU") in ("0", "1"):
        return os.environ["INFERD_TEST_GPU"] == "1"
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return "GPU " in subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.fixture(scope="module")
def gpu_server(tmp_path_factory):
    if not _gpu_visible():
        pytest.skip("no GPU visible (INFERD_TEST_GPU=1 runs it anyway)")
    if b"cudaGetDeviceCount" not in open(lib.inferd_bin(), "rb").read():
        pytest.skip("inferd built without CUDA")
    repo = str(tmp_path_factory.mktemp("types_gpu_repo"))
    for name, (_, ot, cfg) in SIMPLE.items():
        write_model(repo, name, simple_model(None, ot), simple_config(name, cfg, GPU_KIND))
    for op, tname in PAIRS:
        m = grid_model(op, np.dtype(tname))
        write_model(repo, grid_name(op, tname), m, plain_config(grid_name(op, tname), m, GPU_KIND))
    yield from lib.served(repo, ["--strict-readiness", "false"])


def test_gpu_types(gpu_server):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException
    c = grpcclient.InferenceServerClient(url=gpu_server.grpc_url)
    rng = np.random.default_rng(lib.seed_from_env())
    answered, refused, wrong = [], [], []
    try:
        for name, (np_t, ot, _) in SIMPLE.items():
            lib.require_ready(gpu_server, c, name)
            a = np.arange(32, dtype=np_t).reshape(2, 16)
            b = np.full((2, 16), np.iinfo(np_t).max, np_t)
            want = ort_run(simple_model(np_t, ot), {"INPUT0": a, "INPUT1": b})
            res = infer_any(c, grpcclient, name, {"INPUT0": a, "INPUT1": b})
            assert_values(res.as_numpy("OUTPUT0"), want[0], name + " on a GPU")
            assert_values(res.as_numpy("OUTPUT1"), want[1], name + " on a GPU")
        for op, tname in PAIRS:
            name = grid_name(op, tname)
            if not c.is_model_ready(name):
                refused.append((op, tname, "load"))
                continue
            feeds = grid_inputs(op, np.dtype(tname), rng)
            want = ort_run(grid_model(op, np.dtype(tname)), feeds)
            want = want[0] if want is not None else numpy_ref(op, feeds)
            try:
                got = infer_any(c, grpcclient, name, feeds).as_numpy("Y")
            except InferenceServerException as e:
                assert e.status() == "StatusCode.UNIMPLEMENTED", (op, tname, e.status(), e.message())
                refused.append((op, tname, "run"))
                continue
            try:
                assert_values(got, want, "%s on %s on a GPU" % (op, tname))
                answered.append((op, tname))
            except AssertionError as e:
                wrong.append(str(e)[:300])
    finally:
        c.close()
    assert not wrong, wrong
    must = [(op, t) for op, t in PAIRS if op in GPU_MUST]
    assert not [r for r in refused if (r[0], r[1]) in must], [r for r in refused if (r[0], r[1]) in must]
    # what a refused load says: the node and its op
    for op, tname, how in refused:
        if how == "load":
            gpu_server.await_stderr(lambda ls, n=grid_name(op, tname): any(n in l and "failed to load" in l for l in ls))
