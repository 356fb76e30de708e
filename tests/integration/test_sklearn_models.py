"""scikit-learn models through the real server (issue 34, the ai.onnx.ml domain): small models trained
on the fly (a random forest and gradient boosting, classifier and regressor each, a decision tree, a
logistic regression binary and multiclass, a StandardScaler + logistic regression pipeline, a
Normalizer + linear regression pipeline), converted with skl2onnx without ZipMap, served without
config.pbtxt as users do, and asked through tritonclient gRPC and HTTP; labels must equal
onnxruntime's on the same model file exactly, probabilities and predictions within 1e-5. A model
converted with ZipMap (the converter's default) is refused at load with a message naming the option
that leaves it out. Seconds: the models are tiny."""

import os

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib

sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")

from skl2onnx import to_onnx  # noqa: E402
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,  # noqa: E402
                              RandomForestClassifier, RandomForestRegressor)
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import Normalizer, StandardScaler  # noqa: E402
from sklearn.svm import SVC, SVR  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # SVC(probability=True) is deprecated in 1.9

F = 6  # features
OPSET = {"": 17, "ai.onnx.ml": 3}


def _data(seed, n=200, classes=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, F)).astype(np.float32)
    score = x[:, 0] * 1.5 - x[:, 1] + 0.5 * x[:, 2] * x[:, 3]
    if classes == 0:
        return x, (score + 0.1 * rng.normal(size=n)).astype(np.float32)
    edges = np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1])
    return x, np.digitize(score, edges).astype(np.int64)


def _models():
    """{name: (fitted model, is_classifier)}"""
    out = {}
    x3, y3 = _data(1)
    x2, y2 = _data(2, classes=2)
    xr, yr = _data(3, classes=0)
    out["rf_cls"] = (RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0).fit(x3, y3), True)
    out["rf_cls_bin"] = (RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0).fit(x2, y2), True)
    out["gb_cls"] = (GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0).fit(x3, y3), True)
    out["gb_cls_bin"] = (GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0).fit(x2, y2), True)
    out["dt_cls"] = (DecisionTreeClassifier(max_depth=6, random_state=0).fit(x3, y3), True)
    out["rf_reg"] = (RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0).fit(xr, yr), False)
    out["gb_reg"] = (GradientBoostingRegressor(n_estimators=12, max_depth=3, random_state=0).fit(xr, yr), False)
    out["logreg"] = (LogisticRegression(max_iter=500).fit(x3, y3), True)
    out["logreg_bin"] = (LogisticRegression(max_iter=500).fit(x2, y2), True)
    out["scaler_logreg"] = (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(x3 * 3 + 1, y3), True)
    out["norm_linreg"] = (make_pipeline(Normalizer(norm="l2"), LinearRegression()).fit(xr, yr), False)
    out["scaler_svc"] = (make_pipeline(StandardScaler(), SVC()).fit(x3 * 2 - 1, y3), True)
    out["svc_bin"] = (SVC(kernel="poly", degree=2).fit(x2, y2), True)
    out["svc_prob"] = (SVC(probability=True, random_state=0).fit(x3, y3), True)
    out["svr"] = (SVR(kernel="rbf", C=2.0).fit(xr, yr), False)
    # string class labels: the label output is BYTES
    names = np.array(["setosa", "versicolor", "a class name longer than twenty-four bytes"], dtype=object)
    out["rf_str"] = (RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0).fit(x3, names[y3]), True)
    out["logreg_str"] = (LogisticRegression(max_iter=500).fit(x3, names[y3]), True)
    out["svc_str"] = (SVC().fit(x2, names[y2]), True)
    return out


def _convert(model, is_cls):
    last = model.steps[-1][1] if hasattr(model, "steps") else model
    opts = {id(last): {"zipmap": False}} if is_cls else None
    return to_onnx(model, np.zeros((1, F), np.float32), target_opset=OPSET, options=opts)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("sklearn_repo"))
    models = _models()
    for name, (m, is_cls) in models.items():
        os.makedirs(os.path.join(d, name, "1"))
        with open(os.path.join(d, name, "1", "model.onnx"), "wb") as f:
            f.write(_convert(m, is_cls).SerializeToString())
    m = models["rf_cls"][0]
    os.makedirs(os.path.join(d, "rf_zipmap", "1"))
    with open(os.path.join(d, "rf_zipmap", "1", "model.onnx"), "wb") as f:
        f.write(to_onnx(m, np.zeros((1, F), np.float32), target_opset=OPSET).SerializeToString())
    for name, model in _onehot_models().items():
        os.makedirs(os.path.join(d, name, "1"))
        with open(os.path.join(d, name, "1", "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
    for name, model in _bad_models().items():
        os.makedirs(os.path.join(d, name, "1"))
        with open(os.path.join(d, name, "1", "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
    return d, {k: v[1] for k, v in models.items()}


def _cat_data(seed, n=120):
    rng = np.random.default_rng(seed)
    xi = rng.integers(0, 4, size=(n, 2)).astype(np.int64)
    words = np.array(["red", "green", "blue", "a colour name longer than the inline bytes"], dtype=object)
    xs = words[rng.integers(0, 4, size=(n, 1))]
    y = ((xi[:, 0] + (xs[:, 0] == "blue")) % 3).astype(np.int64)
    return xi, xs, y


def _onehot_models():
    """OneHotEncoder (ai.onnx.ml) before a logistic regression, on INT64 columns and on strings."""
    from sklearn.preprocessing import OneHotEncoder
    xi, xs, y = _cat_data(5)
    out = {}
    m = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression(max_iter=500)).fit(xi, y)
    out["onehot_int"] = to_onnx(m, xi[:1], target_opset=OPSET, options={id(m.steps[-1][1]): {"zipmap": False}})
    m = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression(max_iter=500)).fit(xs, y)
    from skl2onnx.common.data_types import StringTensorType
    out["onehot_str"] = to_onnx(m, initial_types=[("X", StringTensorType([None, 1]))], target_opset=OPSET,
                                options={id(m.steps[-1][1]): {"zipmap": False}})
    return out


def _tree_reg(name, **over):
    """A TreeEnsembleRegressor of one tree (node 0: x0 <= 0.5 ? leaf 1 : leaf 2) with attributes overridden."""
    from onnx import TensorProto, helper
    attrs = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                 nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.5, 0, 0],
                 nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0], target_treeids=[0, 0],
                 target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[1.0, 2.0], n_targets=1)
    attrs.update(over)
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain="ai.onnx.ml", **attrs)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, F])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])


def _small_ops_model():
    """X [N, 4] -> Normalizer MAX, L1, L2; Scaler; Binarizer; ArrayFeatureExtractor; OneHotEncoder on floats."""
    from onnx import TensorProto, helper
    ml = "ai.onnx.ml"
    nodes = [helper.make_node("Normalizer", ["X"], ["MAX"], domain=ml, norm="MAX"),
             helper.make_node("Normalizer", ["X"], ["L1"], domain=ml, norm="L1"),
             helper.make_node("Normalizer", ["X"], ["L2"], domain=ml, norm="L2"),
             helper.make_node("Scaler", ["X"], ["SC"], domain=ml, offset=[0.5, -1, 0, 2], scale=[2, 0.5, -1, 3]),
             helper.make_node("Binarizer", ["X"], ["BIN"], domain=ml, threshold=0.25),
             helper.make_node("ArrayFeatureExtractor", ["X", "idx"], ["AFE"], domain=ml),
             helper.make_node("OneHotEncoder", ["X"], ["OH"], domain=ml, cats_int64s=[0, 1, -2])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["MAX", "L1", "L2", "SC", "BIN", "AFE", "OH"]]
    g = helper.make_graph(nodes, "small_ops", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 4])], outs,
                          initializer=[helper.make_tensor("idx", TensorProto.INT64, [3], [3, 0, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ml, 1)])


def _linear_one_score(post):
    """A LinearClassifier with one row of coefficients for two labels: its sign picks the label."""
    from onnx import TensorProto, helper
    n = helper.make_node("LinearClassifier", ["X"], ["L", "P"], domain="ai.onnx.ml", coefficients=[1, -1, 0.5, 2, 0, 0],
                         intercepts=[0.1], classlabels_ints=[3, 7], post_transform=post)
    g = helper.make_graph([n], "one_score", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, F])],
                          [helper.make_tensor_value_info("L", TensorProto.INT64, [None]),
                           helper.make_tensor_value_info("P", TensorProto.FLOAT, [None, 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])


def _bad_models():
    return {
        "small_ops": _small_ops_model(),
        "one_score_none": _linear_one_score("NONE"),
        "one_score_logistic": _linear_one_score("LOGISTIC"),
        "tree_ok": _tree_reg("tree_ok"),
        # a branch to a node id the tree does not have: refused at load, naming it
        "tree_bad_id": _tree_reg("tree_bad_id", nodes_truenodeids=[7, 0, 0]),
        # a weight on a branch node, and a target outside n_targets: both named
        "tree_bad_weight": _tree_reg("tree_bad_weight", target_nodeids=[0, 2]),
        "tree_bad_target": _tree_reg("tree_bad_target", target_ids=[0, 3]),
        # nodes that lead to each other: the load cannot tell, the request fails saying so
        "tree_cycle": _tree_reg("tree_cycle", nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ", "LEAF"],
                                nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[1, 0, 0], target_nodeids=[2, 2]),
    }


@pytest.fixture(scope="module")
def srv(repo):
    yield from lib.served(repo[0], ["--model-control-mode", "explicit", "--strict-readiness", "false",
                                   "--default-max-batch-size", "64"])


@pytest.fixture(scope="module")
def gc(srv):
    yield from lib.grpc_client(srv)


def _rows(seed, n):
    x = np.random.default_rng(seed).normal(size=(n, F)).astype(np.float32)
    x[0] = 0.0  # splits at exact thresholds are common at zero
    return x


def _compare(repo_dir, name, got):
    sess = ort.InferenceSession(os.path.join(repo_dir, name, "1", "model.onnx"), providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    return sess, outs


def _check(name, is_cls, outs, ref, got):
    for o, r in zip(outs, ref):
        g = got[o]
        assert g is not None, "%s: output %s missing" % (name, o)
        assert tuple(g.shape) == tuple(r.shape), "%s/%s: shape %s, onnxruntime %s" % (name, o, g.shape, r.shape)
        if r.dtype == object:
            assert g.dtype == object
            assert [v.decode() for v in g.reshape(-1)] == list(r.reshape(-1)), "%s: labels differ" % name
        elif r.dtype == np.int64:
            assert g.dtype == np.int64
            np.testing.assert_array_equal(g, r, err_msg="%s: labels differ from onnxruntime's" % name)
        else:
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5, err_msg="%s/%s" % (name, o))


@pytest.mark.parametrize("name", ["rf_cls", "rf_cls_bin", "gb_cls", "gb_cls_bin", "dt_cls", "rf_reg", "gb_reg",
                                  "logreg", "logreg_bin", "scaler_logreg", "norm_linreg", "scaler_svc", "svc_bin",
                                  "svc_prob", "svr", "rf_str", "logreg_str", "svc_str"])
def test_grpc_matches_onnxruntime(gc, repo, name):
    repo_dir, kinds = repo
    gc.load_model(name)
    assert gc.is_model_ready(name)
    sess, outs = _compare(repo_dir, name, None)
    x = _rows(hash(name) % 1000, 37)
    ref = sess.run(outs, {"X": x})
    inp = grpcclient.InferInput("X", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    res = gc.infer(name, [inp], outputs=[grpcclient.InferRequestedOutput(o) for o in outs])
    _check(name, kinds[name], outs, ref, {o: res.as_numpy(o) for o in outs})
    if kinds[name]:
        # the labels are not all one class: the comparison means something
        assert len(set(ref[0].tolist())) > 1, name


@pytest.mark.parametrize("name", ["onehot_int", "onehot_str"])
def test_onehot_matches_onnxruntime(gc, repo, name):
    repo_dir, _ = repo
    gc.load_model(name)
    sess, outs = _compare(repo_dir, name, None)
    xi, xs, _ = _cat_data(11, n=23)
    if name == "onehot_int":
        x = xi.copy()
        x[0, 0] = 9  # a category never seen: all zeros, as handle_unknown="ignore" asks
        inp = grpcclient.InferInput("X", list(x.shape), "INT64")
    else:
        x = xs.copy()
        x[0, 0] = "purple"
        inp = grpcclient.InferInput("X", list(x.shape), "BYTES")
    inp.set_data_from_numpy(x)
    ref = sess.run(outs, {"X": x})
    res = gc.infer(name, [inp], outputs=[grpcclient.InferRequestedOutput(o) for o in outs])
    _check(name, True, outs, ref, {o: res.as_numpy(o) for o in outs})
    assert len(set(ref[0].tolist())) > 1, name


def test_auto_kind_stays_on_cpu(gc):
    """Without config.pbtxt the instance group is KIND_AUTO: ai.onnx.ml nodes have no CUDA path, so it
    resolves to KIND_CPU even where GPUs are visible (this checks it on a GPU host; on CI's it is CPU anyway)."""
    gc.load_model("rf_cls")
    cfg = gc.get_model_config("rf_cls", as_json=True)["config"]
    kinds = [g.get("kind") for g in cfg["instance_group"]]
    assert kinds and all(k == "KIND_CPU" for k in kinds), kinds


def test_http_and_single_rows(srv, gc, repo):
    """One row at a time over HTTP (the batcher may join them) equals the whole batch's answer."""
    repo_dir, _ = repo
    name = "gb_cls"
    gc.load_model(name)
    sess, outs = _compare(repo_dir, name, None)
    x = _rows(7, 5)
    ref = sess.run(outs, {"X": x})
    hc = httpclient.InferenceServerClient(srv.http_url[len("http://"):])
    try:
        for i in range(len(x)):
            inp = httpclient.InferInput("X", [1, F], "FP32")
            inp.set_data_from_numpy(x[i:i + 1], binary_data=False)
            res = hc.infer(name, [inp])
            assert res.as_numpy(outs[0]).tolist() == ref[0][i:i + 1].tolist()
            np.testing.assert_allclose(res.as_numpy(outs[1]), ref[1][i:i + 1], rtol=1e-5, atol=1e-5)
    finally:
        hc.close()


def test_small_ops_match_onnxruntime(gc, repo):
    """Rows of zeros, negatives and mixed signs through the small ops, against onnxruntime."""
    gc.load_model("small_ops")
    x = np.array([[0, 0, 0, 0], [-1, -2, -0.5, -4], [1, -3, 2, 0.25], [1.9, 0.3, -2.2, 5]], np.float32)
    sess, outs = _compare(repo[0], "small_ops", None)
    ref = sess.run(outs, {"X": x})
    inp = grpcclient.InferInput("X", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    res = gc.infer("small_ops", [inp], outputs=[grpcclient.InferRequestedOutput(o) for o in outs])
    _check("small_ops", False, outs, ref, {o: res.as_numpy(o) for o in outs})


@pytest.mark.parametrize("name", ["one_score_none", "one_score_logistic"])
def test_linear_one_score_matches_onnxruntime(gc, repo, name):
    gc.load_model(name)
    x = _rows(3, 9)
    sess, outs = _compare(repo[0], name, None)
    ref = sess.run(outs, {"X": x})
    inp = grpcclient.InferInput("X", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    res = gc.infer(name, [inp], outputs=[grpcclient.InferRequestedOutput(o) for o in outs])
    _check(name, True, outs, ref, {o: res.as_numpy(o) for o in outs})
    assert len(set(ref[0].tolist())) == 2, name


def test_hand_written_tree(gc):
    gc.load_model("tree_ok")
    x = np.array([[0.5] + [0] * (F - 1), [0.75] + [0] * (F - 1)], np.float32)
    inp = grpcclient.InferInput("X", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    assert gc.infer("tree_ok", [inp]).as_numpy("Y").tolist() == [[1.0], [2.0]]


@pytest.mark.parametrize("name,words", [("tree_bad_id", "true node id 7 is not in the tree"),
                                        ("tree_bad_weight", "which is no LEAF node"),
                                        ("tree_bad_target", "target_ids[1] = 3 is outside 0..0")])
def test_bad_trees_refused_at_load(gc, name, words):
    with pytest.raises(InferenceServerException) as ei:
        gc.load_model(name)
    assert words in str(ei.value), str(ei.value)
    assert not gc.is_model_ready(name)


def test_tree_cycle_fails_the_request(srv, gc):
    gc.load_model("tree_cycle")
    x = np.zeros((2, F), np.float32)
    inp = grpcclient.InferInput("X", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException) as ei:
        gc.infer("tree_cycle", [inp])
    assert "cycle" in str(ei.value), str(ei.value)
    assert srv.alive()
    gc.load_model("tree_ok")  # the server still serves
    assert gc.is_model_ready("tree_ok")


def test_zipmap_refused_with_the_fix(gc):
    with pytest.raises(InferenceServerException) as ei:
        gc.load_model("rf_zipmap")
    msg = str(ei.value)
    assert "ZipMap" in msg and "'zipmap': False" in msg, msg
    assert not gc.is_model_ready("rf_zipmap")
