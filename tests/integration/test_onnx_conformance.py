"""ONNX's own operator conformance suite (the backend node tests of the installed onnx package) through
the real server on the CPU: every case of tests/onnx_conformance/expected_pass.txt must still pass.

The whole suite is generated and run (a few seconds: the models are one node each), so a case that
newly passes is reported too, for expected_pass.txt to take it in; only the expected ones can fail
the test. tests/onnx_conformance/run.py is the harness (totals and the table of failure reasons).
"""

import os
import sys

import onnx
import pytest

import inferd_testlib as lib

HERE = os.path.dirname(os.path.abspath(__file__))
CONF = os.path.join(HERE, "..", "onnx_conformance")
sys.path.insert(0, CONF)

import gen_cases  # noqa: E402
import run as conformance  # noqa: E402

# expected_pass.txt was measured with this onnx; another one has other cases (and other data)
ONNX_VERSION = "1.23.2"


def _run(d):
    """conformance.run over DIR with inferd: (results, cases left out), none left out. (Sanitizer builds
    once left out the cases with a rank-0 input: the request check copied their shape from NULL,
    undefined behaviour UBSan aborts on; fixed in server/core/infer_validate.c.)"""
    return conformance.run(d, conformance.Inferd(d)), set()


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("onnx_node_tests"))
    gen_cases.generate(d)
    return d


def test_expected_cases_pass(suite):
    if onnx.__version__ != ONNX_VERSION:
        pytest.skip("onnx %s installed; expected_pass.txt is for onnx %s (tests/requirements.txt)"
                    % (onnx.__version__, ONNX_VERSION))
    expected = conformance.read_list(os.path.join(CONF, "expected_pass.txt"))
    runner = conformance.Inferd(suite)
    results = conformance.run(suite, runner)
    missing = sorted(expected - set(results))
    assert not missing, "expected cases the installed onnx does not have: %s" % missing
    passed = {c for c, (r, _) in results.items() if r is None}
    crashes = {c: w for c, (r, w) in results.items() if r == "server crash"}
    regressed = {c: "%s: %s" % results[c] for c in sorted(expected - passed)}
    new = sorted(passed - expected)
    print("\nonnx node tests: %d of %d pass (%d expected)" % (len(passed), len(results), len(expected)))
    if new:
        print("newly passing (add to tests/onnx_conformance/expected_pass.txt): %d\n  %s"
              % (len(new), "\n  ".join(new)))
    assert not crashes, "the server died at: %s" % crashes
    for rc, bad in runner.exits:
        assert rc == 0 and not bad, "inferd exit code %r (want 0), sanitizer lines: %r" % (rc, bad[:5])
    assert not regressed, "%d expected cases fail:\n%s" % (
        len(regressed), "\n".join("  %s  %s" % (c, w[:300]) for c, w in regressed.items()))
    # training steps are refused with a message, never run silently as inference (the one
    # wrong answer: Dropout with training_mode true answered as the identity)
    for c in ("test_training_dropout", "test_training_dropout_mask"):
        r, why = results[c]
        assert r == "request error" and "training_mode true" in why, (c, r, why)


def test_recurrent_ops_with_y_against_onnxruntime(tmp_path):
    """The RNN, GRU and LSTM node tests omit the first output Y (they run: ENG_OP_OUT0_OPTIONAL), so
    their sequences go unchecked there: the same models with Y named, served by inferd, against
    onnxruntime on every output."""
    import dataclasses

    import numpy as np
    import onnxruntime as ort
    from onnx import helper

    cases = []
    for case in gen_cases.collect():
        node = case.model.graph.node[0] if len(case.model.graph.node) == 1 else None
        if node is None or node.op_type not in ("RNN", "GRU", "LSTM") or node.output[0]:
            continue
        m = onnx.ModelProto()
        m.CopyFrom(case.model)
        m.graph.node[0].output[0] = "Y"
        m.graph.output.insert(0, helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None))
        inputs = case.data_sets[0][0]
        feeds = {vi.name: np.asarray(a) for vi, a in zip(m.graph.input, inputs)}
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run([o.name for o in m.graph.output], feeds)
        # Y's declared shape, as the harness writes dims from it
        m.graph.output[0].CopyFrom(helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, list(want[0].shape)))
        cases.append(dataclasses.replace(case, name=case.name + "_with_y", model=m, data_sets=[(inputs, want)]))
    assert len(cases) >= 10, [c.name for c in cases]
    d = str(tmp_path)
    os.makedirs(os.path.join(d, "repo"))
    os.makedirs(os.path.join(d, "data"))
    entries = [gen_cases.write_case(c, os.path.join(d, "repo"), os.path.join(d, "data")) for c in cases]
    import json
    with open(os.path.join(d, "cases.json"), "w") as f:
        json.dump({"onnx": onnx.__version__, "cases": entries}, f)
    results, skip = _run(d)
    bad = {c: "%s: %s" % r for c, r in results.items() if r[0] is not None}
    assert not bad, bad
    assert len(results) + len(skip) == len(cases)


def _write_suite(d, cases):
    import json
    os.makedirs(os.path.join(d, "repo"))
    os.makedirs(os.path.join(d, "data"))
    entries = [gen_cases.write_case(c, os.path.join(d, "repo"), os.path.join(d, "data")) for c in cases]
    with open(os.path.join(d, "cases.json"), "w") as f:
        json.dump({"onnx": onnx.__version__, "cases": entries}, f)


def test_parameter_inputs_folded(tmp_path):
    """The cases whose parameters (Reduce axes, Resize scales, Conv weights...) are graph inputs, which
    the server now reads at run time (engine/cpu/plan_values.c), with those inputs turned into
    initializers as exporters write them: the constant (folded, fully static) path checked on the same
    kernels (cubic Resize, the new reductions...) against the cases' own expected outputs.
    parameter_inputs.txt names the cases and inputs; expected_pass_folded.txt lists the ones that pass
    (by the original case names)."""
    if onnx.__version__ != ONNX_VERSION:
        pytest.skip("onnx %s installed; the lists are for onnx %s" % (onnx.__version__, ONNX_VERSION))
    names = gen_cases.read_parameter_inputs()
    folded = gen_cases.folded_cases()  # what gen_cases.py --folded writes (tests/onnx_conformance/gpu_run.sh)
    d = str(tmp_path)
    _write_suite(d, folded)
    got, skip = _run(d)
    passed = {c[: -len("_folded")] for c, (r, _) in got.items() if r is None}
    expected = conformance.read_list(os.path.join(CONF, "expected_pass_folded.txt"))
    expected -= {c[: -len("_folded")] for c in skip}
    print("\nparameters given as graph inputs: %d cases; with them folded: %d pass (%d expected)"
          % (len(names), len(passed), len(expected)))
    new = sorted(passed - expected)
    if new:
        print("newly passing (add to tests/onnx_conformance/expected_pass_folded.txt): %d\n  %s"
              % (len(new), "\n  ".join(new)))
    regressed = {c: "%s: %s" % got.get(c + "_folded", ("missing", "")) for c in sorted(expected - passed)}
    assert not regressed, regressed


def test_gpu_run_plumbing(suite):
    """What tests/onnx_conformance/gpu_run.sh relies on, checked here on CPU instances: run.py's placement
    (each loaded case's ready line: instances, on GPU, host-fallback nodes) for every loaded case, shards
    that split the cases without overlap, a deadline that reports the cases it left; and the parse of a
    GPU plan's lines as server/core/registry.c and engine/cpu/plan_hostfb.c write them."""
    pattern = r"^test_(abs|relu|add|dft|sequence_insert_at_back)$"
    whole = conformance.Inferd(suite, placement=True)
    got = conformance.run(suite, whole, pattern=pattern)
    assert sorted(got) == ["test_abs", "test_add", "test_dft", "test_relu", "test_sequence_insert_at_back"], got
    loaded = {c for c, (r, _) in got.items() if not (r or "").startswith(("load", "not servable"))}
    assert {"test_abs", "test_add", "test_relu"} <= loaded, got
    assert set(whole.placement) == loaded, (whole.placement, got)
    for c in loaded:
        assert whole.placement[c] == {"instances": 1, "gpu": 0, "host_nodes": 0, "host_ops": [], "host_lines": 0}, c

    halves = [conformance.run(suite, conformance.Inferd(suite), pattern=pattern, shard=(k, 2)) for k in (0, 1)]
    assert not set(halves[0]) & set(halves[1]) and set(halves[0]) | set(halves[1]) == set(got), halves
    assert len(halves[0]) == 3 and len(halves[1]) == 2, halves
    late = conformance.run(suite, conformance.Inferd(suite), pattern=pattern, deadline_s=0)
    assert {r for r, _ in late.values()} == {"not run: deadline"} and set(late) == set(got), late

    lines = [
        "I1203 18:00:00 registry.c] model 'other' version 1 is ready (1 instance, 1 on GPU, max_batch_size 0)",
        "model 'm' version 1 is ready (2 instances, 2 on GPU, max_batch_size 8, 2 nodes on the host)",
        "model 'm' version 1: node 'fft' (op_type 'DFT'): no CUDA path, runs on the host (64 bytes in, 128 out per batch)",
        "model 'm' version 1: node '' (op_type 'Einsum'): no CUDA path (no kernel), runs on the host "
        "(copies sized per input-shape signature)",
        "model 'other' version 1: node 'x' (op_type 'Unique'): no CUDA path, runs on the host (8 bytes in, 8 out per batch)",
    ]
    assert conformance.parse_placement(lines, "m") == {
        "instances": 2, "gpu": 2, "host_nodes": 2, "host_ops": ["DFT", "Einsum"], "host_lines": 2}
    assert conformance.parse_placement(lines[:1], "other") == {
        "instances": 1, "gpu": 1, "host_nodes": 0, "host_ops": [], "host_lines": 0}
    assert conformance.parse_placement(lines[1:], "absent") is None
