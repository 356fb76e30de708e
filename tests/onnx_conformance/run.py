#!/usr/bin/env python3
"""Runs ONNX's backend node tests (written by gen_cases.py) through inferd on the instances their configs
ask for (CPU, or GPU with --kind KIND_GPU there), or through onnxruntime for the yardstick, and says which
pass and why the others fail.

    run.py DIR [--onnxruntime] [--filter REGEX] [--only LIST] [--write-pass FILE] [--json FILE] [-v]
           [--inferd BIN] [--placement FILE] [--load-timeout S] [--shard K/N] [--deadline-s S]

One inferd process serves DIR/repo in explicit model-control mode; each case is loaded through
RepositoryModelLoad (tritonclient gRPC), its inputs sent through ModelInfer, its outputs compared
with the expected ones as onnx.backend.test's runner does (same shape, same element type, then
assert_allclose with the case's rtol/atol, 1e-3/1e-7, NaN equal to NaN; strings exactly), and the
model unloaded again. A server that dies is restarted; the case that killed it counts as a crash.

Each failure gets one reason: "not servable: ..." (no KServe form, from gen_cases), "load: unsupported
op X", "load: element type", "load: parameter as graph input", "load: other", "wrong values",
"request error", "server crash". Totals and a table of reasons by count go to stdout.

For GPU instances (tests/onnx_conformance/gpu_run.sh): --placement FILE records per loaded case what the
server's ready line says (instances, how many on a GPU, the nodes a GPU plan runs on the host: engine/cuda/
plan_cuda_host.h) and the op types of those nodes, from its info-level log; --shard K/N runs every N-th case
from the K-th (several servers at once); --deadline-s stops starting cases after that long, the rest counted
"not run: deadline", so a bounded run still reports.
"""

import argparse
import collections
import json
import os
import pickle
import re
import signal
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

WIRE = {"TYPE_FP32": "FP32", "TYPE_FP64": "FP64", "TYPE_FP16": "FP16", "TYPE_BF16": "BF16", "TYPE_INT8": "INT8",
        "TYPE_INT16": "INT16", "TYPE_INT32": "INT32", "TYPE_INT64": "INT64", "TYPE_UINT8": "UINT8",
        "TYPE_UINT16": "UINT16", "TYPE_UINT32": "UINT32", "TYPE_UINT64": "UINT64", "TYPE_BOOL": "BOOL",
        "TYPE_STRING": "BYTES"}


# --- comparison (onnx/backend/test/runner's assert_similar_outputs, NaN equal to NaN)

def _is_bf16(a):
    return isinstance(a, np.ndarray) and a.dtype.name == "bfloat16"


def compare(ref, out, rtol, atol, wire_bf16=False):
    """None when out matches ref, else why not. wire_bf16: out came back over KServe as BF16 (tritonclient
    gives float32 for it), so the dtype check is on the reference alone."""
    if isinstance(ref, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(out) != len(ref):
            return "sequence of %s, expected %d items" % (type(out).__name__, len(ref))
        for r, o in zip(ref, out):
            why = compare(r, o, rtol, atol)
            if why:
                return why
        return None
    if ref is None or out is None:
        return None if ref is None and out is None else "optional: got %r, expected %r" % (type(out), type(ref))
    ref = np.asarray(ref)
    out = np.asarray(out)
    if tuple(out.shape) != tuple(ref.shape):
        return "shape %s, expected %s" % (tuple(out.shape), tuple(ref.shape))
    if ref.dtype == object:
        o = np.vectorize(lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else v, otypes=[object])(out) \
            if out.size else out
        return None if np.array_equal(o.astype(str), ref.astype(str)) else "strings differ"
    r = rtol
    if _is_bf16(ref) or wire_bf16:
        r = max(rtol, 2 ** -6)
        ref = ref.astype(np.float32)
        out = out.astype(np.float32)
    elif out.dtype != ref.dtype:
        return "element type %s, expected %s" % (out.dtype, ref.dtype)
    try:
        np.testing.assert_allclose(out, ref, rtol=r, atol=atol, equal_nan=True)
    except AssertionError as e:
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        return "values differ: " + " | ".join(lines[1:4])
    return None


# --- failure reasons

def classify_load(msg):
    """One reason for a load error message (the first one the server names)."""
    ops = sorted(set(re.findall(r"\(op_type '([A-Za-z0-9_.]+)'\)(?:: unsupported op|[;,]|$)", msg)))
    if "unsupported op" in msg or "unsupported nodes" in msg:
        if ops:
            return "load: unsupported op " + "+".join(ops)
    if "unsupported domain" in msg or "imports no ONNX opset" in msg:
        return "load: unsupported domain"
    low = msg.lower()
    if "no cuda device is visible" in low:
        return "load: no CUDA device"
    if re.search(r"must be known when planning|must be an initializer or constant|graph input", low):
        return "load: parameter as graph input"
    if re.search(r"element type|must be a \w+ tensor, got|dtype|unsupported: bitcast from", low):
        return "load: element type"
    if re.search(r"\d+ inputs and \d+ outputs, expected", low):
        return "load: arity (an omitted first output)" if re.search(r"'(rnn|gru|lstm)'", low) else "load: arity"
    if re.search(r"unsupported: (mode|attribute|\w+_mode|training_mode|antialias|.*output)", low):
        return "load: unsupported attribute or mode"
    return "load: other"


# --- runners

def load_data(d, model):
    with open(os.path.join(d, "data", model + ".pkl"), "rb") as f:
        return pickle.load(f)


def read_config_types(d, model):
    """{tensor name: wire datatype} from the case's config.pbtxt."""
    txt = open(os.path.join(d, "repo", model, "config.pbtxt")).read()
    return {json.loads(m.group(1)): WIRE[m.group(2)]
            for m in re.finditer(r'name: ("(?:[^"\\]|\\.)*")\n  data_type: (TYPE_[A-Z0-9]+)', txt)}


def to_wire_array(a, wire):
    if wire == "BF16":  # tritonclient takes ml_dtypes' bfloat16 (onnx's own bfloat16 arrays)
        import ml_dtypes
        return np.asarray(a).astype(ml_dtypes.bfloat16)
    if wire == "BYTES":
        return np.asarray(a, dtype=object)
    return np.asarray(a)


# the ready line of a loaded version (server/core/registry.c) and a GPU plan's host-fallback node lines
READY_LINE = re.compile(r"model '([^']+)' version \S+ is ready \((\d+) instances?, (\d+) on GPU, "
                        r"max_batch_size -?\d+(?:, (\d+) nodes? on the host)?\)")
HOST_NODE_LINE = re.compile(r"model '([^']+)' version \S+: node '.*' \(op_type '([^']+)'\): no CUDA path")
# a model whose GPU instances the engine placed on the host as a whole (engine/model.c: STRING inputs or outputs)
HOST_MODEL_LINE = re.compile(r"model '([^']+)' version \S+: (.* GPU instances? runs? on the host.*)$")


def parse_placement(lines, model):
    """{instances, gpu, host_nodes, host_ops} from the log lines of model's load, or None when its ready
    line is not among them. host_ops: the op types of the host nodes' lines, which come after it;
    host_model: why the engine placed its GPU instances on the host as a whole, when it did."""
    got = None
    ops = []
    host_model = None
    for ln in lines:
        m = HOST_MODEL_LINE.search(ln.rstrip())
        if m and m.group(1) == model:
            host_model = m.group(2)
        m = READY_LINE.search(ln)
        if m and m.group(1) == model:
            got = {"instances": int(m.group(2)), "gpu": int(m.group(3)), "host_nodes": int(m.group(4) or 0)}
        m = HOST_NODE_LINE.search(ln)
        if m and m.group(1) == model:
            ops.append(m.group(2))
    if got is not None:
        got["host_ops"] = sorted(set(ops))
        got["host_lines"] = len(ops)
        if host_model:
            got["host_model"] = host_model
    return got


class Inferd:
    """One inferd in explicit model-control mode, serving the instances the configs ask for; restarted
    when it dies. binary: default INFERD_BIN or build/bin/inferd. placement: keep each loaded case's
    ready line (self.placement[case]); the server then logs at info level. load_timeout: seconds a
    load may take (GPU plans capture and tune at load)."""

    def __init__(self, d, extra_args=(), binary=None, placement=False, load_timeout=120):
        self.d = d
        self.extra = list(extra_args)
        self.binary = binary
        self.want_placement = placement
        self.load_timeout = load_timeout
        self.placement = {}  # case: parse_placement's answer
        self.srv = None
        self.client = None
        self.exits = []  # (exit code, sanitizer lines) of every server this runner stopped

    def start(self):
        import inferd_testlib as lib
        import tritonclient.grpc as grpcclient
        self.srv = lib.ServerProcess(os.path.join(self.d, "repo"),
                                     ["--model-control-mode", "explicit", "--strict-readiness", "false",
                                      "--log-level", "info" if self.want_placement else "warn"] + self.extra,
                                     binary=self.binary)
        self.srv.start()
        self.client = grpcclient.InferenceServerClient(url=self.srv.grpc_url)

    def _record_placement(self, e, first_line):
        """The ready line of e's model and its host nodes' lines (written after it, one per node): the
        server writes them before it answers the load, but the reader thread may not have them yet."""
        model = e["model"]

        def complete(ls):
            p = parse_placement(ls[first_line:], model)
            return p is not None and p["host_lines"] >= p["host_nodes"]
        try:
            lines = self.srv.await_stderr(complete, 10.0)
        except AssertionError:  # no ready line, or fewer node lines than it counts (host_lines says): what is there
            lines = self.srv.await_stderr(lambda ls: True, 0)
        p = parse_placement(lines[first_line:], model)
        self.placement[e["case"]] = p if p is not None else {"missing": "no ready line for '%s' in the log" % model}

    def stop(self):
        if self.srv:
            self.client.close()
            rc = self.srv.stop()
            bad = self.srv.sanitizer_lines()
            self.exits.append((rc, bad))
            if bad:
                print("SANITIZER: %s" % bad[:5], file=sys.stderr)
            self.srv = None

    def alive(self):
        return self.srv is not None and self.srv.alive()

    def died(self, exc):
        """Whether the server is gone after exc: an UNAVAILABLE status (a closed stream, a refused
        connection) is a server on its way down (a sanitizer still printing its report), so wait
        for its exit rather than send the next case to it."""
        if "UNAVAILABLE" in str(exc) and self.alive():
            try:
                self.srv.proc.wait(30)
            except Exception:  # noqa: BLE001 (subprocess.TimeoutExpired: it is alive after all)
                pass
        return not self.alive()

    def run_case(self, e):
        """(reason or None, detail)."""
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException
        if not self.alive():
            if self.srv is not None:  # died at the case before: keep its exit for the caller, start another
                self.client.close()
                self.exits.append((self.srv.wait_exit(), self.srv.sanitizer_lines()))
            self.start()
        model = e["model"]
        first_line = len(self.srv.lines)
        try:
            self.client.load_model(model, client_timeout=self.load_timeout)
        except InferenceServerException as x:
            if self.died(x):
                return "server crash", "at load: " + str(x)
            return classify_load(x.message() or str(x)), x.message() or str(x)
        if self.want_placement:
            self._record_placement(e, first_line)
        try:
            data = load_data(self.d, model)
            types = read_config_types(self.d, model)
            ins = []
            for name, a in data["inputs"]:
                wire = types[name]
                a = to_wire_array(a, wire)
                x = grpcclient.InferInput(name, list(a.shape), wire)
                try:
                    x.set_data_from_numpy(a)
                except InferenceServerException as err:
                    return "request error", "input '%s' (%s, %s): %s" % (name, wire, a.dtype, err.message())
                ins.append(x)
            outs = [grpcclient.InferRequestedOutput(n) for n, _ in data["outputs"]]
            try:
                res = self.client.infer(model, ins, outputs=outs, client_timeout=120)
            except InferenceServerException as x:
                if self.died(x):
                    return "server crash", "at infer: " + str(x)
                return "request error", x.message() or str(x)
            for name, ref in data["outputs"]:
                got = res.as_numpy(name)
                if got is None:
                    return "request error", "output '%s' missing" % name
                why = compare(ref, got, e["rtol"], e["atol"], wire_bf16=types[name] == "BF16")
                if why:
                    return "wrong values", "%s: %s" % (name, why)
            return None, ""
        finally:
            if self.alive():
                try:
                    self.client.unload_model(model, client_timeout=60)
                except InferenceServerException as x:
                    self.died(x)


class Ort:
    """onnxruntime on the CPU, the yardstick, with the same comparison."""

    def __init__(self, d):
        import onnxruntime as ort
        self.ort = ort
        self.d = d
        self.so = ort.SessionOptions()
        self.so.intra_op_num_threads = 1
        self.so.log_severity_level = 4

    def start(self):
        pass

    def stop(self):
        pass

    def run_case(self, e):
        model = e["model"]
        try:
            s = self.ort.InferenceSession(os.path.join(self.d, "repo", model, "1", "model.onnx"), self.so,
                                          providers=["CPUExecutionProvider"])
        except Exception as x:  # noqa: BLE001 (onnxruntime raises its own, untyped, classes)
            msg = str(x)
            m = re.search(r"Could not find an implementation for (\w+)", msg)
            return ("load: unsupported op " + m.group(1)) if m else "load: other", msg.splitlines()[0][:300]
        data = load_data(self.d, model)
        feeds = {n: np.asarray(a) if isinstance(a, np.generic) else a for n, a in data["inputs"]}
        try:
            got = s.run([n for n, _ in data["outputs"]], feeds)
        except Exception as x:  # noqa: BLE001
            return "request error", str(x).splitlines()[0][:300]
        for (name, ref), o in zip(data["outputs"], got):
            why = compare(ref, o, e["rtol"], e["atol"])
            if why:
                return "wrong values", "%s: %s" % (name, why)
        return None, ""


def run(d, runner, only=None, pattern=None, verbose=False, servable_only=False, shard=(0, 1), deadline_s=None,
        interruptible=False):
    """{case: (reason or None, detail)} over the cases in DIR/cases.json. shard (k, n): only the cases
    k, k+n, k+2n... of those selected. deadline_s: no case starts after that many seconds; the rest are
    "not run: deadline". interruptible: SIGINT (KeyboardInterrupt) ends the run with the case it stopped
    and the rest as "not run: interrupted", so a run stopped from outside (timeout -s INT) still reports."""
    entries = json.load(open(os.path.join(d, "cases.json")))["cases"]
    entries = [e for e in entries if (only is None or e["case"] in only) and
               (not pattern or re.search(pattern, e["case"]))][shard[0]::shard[1]]
    results = {}
    t0 = time.monotonic()
    run_one = _case_runner(runner, servable_only, deadline_s, t0)
    runner.start()
    try:
        for i, e in enumerate(entries):
            if interruptible:
                try:
                    results[e["case"]] = run_one(e)
                except KeyboardInterrupt:
                    for x in entries[i:]:
                        results[x["case"]] = ("not run: interrupted", "SIGINT after %.0f s" % (time.monotonic() - t0))
                    break
            else:
                results[e["case"]] = run_one(e)
            if verbose:
                r, why = results[e["case"]]
                print("%-60s %s %s" % (e["case"], "PASS" if r is None else "FAIL " + r, why[:300]), flush=True)
    finally:
        runner.stop()
    return results


def _case_runner(runner, servable_only, deadline_s, t0):
    """run()'s step: one case's (reason or None, detail)."""
    def run_one(e):
        if deadline_s is not None and time.monotonic() - t0 > deadline_s:
            return "not run: deadline", "%.0f s passed before it started" % deadline_s
        if "skip" in e and (servable_only or isinstance(runner, Inferd)):
            return "not servable: " + re.sub(r" ?\(?'[^']*'\)?", "", e["skip"].split(";")[0]), e["skip"]
        return runner.run_case(e)
    return run_one


def report(results, out=sys.stdout):
    n = len(results)
    passed = sum(1 for r, _ in results.values() if r is None)
    print("%d of %d cases pass (%.1f%%)" % (passed, n, 100.0 * passed / max(n, 1)), file=out)
    reasons = collections.Counter(r for r, _ in results.values() if r is not None)
    def group(r):
        if r.startswith("load: unsupported op"):
            return "load: unsupported op"
        if r.startswith("not servable: element type"):
            return "not servable: element type with no Triton type"
        return r
    groups = collections.Counter(group(r) for r in reasons.elements())
    print("\nfailures by class:", file=out)
    for r, c in groups.most_common():
        print("  %5d  %s" % (c, r), file=out)
    print("\nfailures by reason:", file=out)
    for r, c in reasons.most_common():
        print("  %5d  %s" % (c, r), file=out)


def read_list(path):
    with open(path) as f:
        return {ln.split("#", 1)[0].strip() for ln in f} - {""}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="what gen_cases.py wrote")
    ap.add_argument("--onnxruntime", action="store_true", help="run through onnxruntime instead of inferd")
    ap.add_argument("--servable-only", action="store_true",
                    help="with --onnxruntime: count cases with no KServe form as failures, as for inferd")
    ap.add_argument("--filter", help="only cases whose name matches this regular expression")
    ap.add_argument("--only", help="file of case names to run, one a line")
    ap.add_argument("--write-pass", help="write the passing cases' names to this file")
    ap.add_argument("--json", help="write {case: [reason, detail]} to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    ap.add_argument("--inferd", help="the inferd binary (default: INFERD_BIN, else build/bin/inferd)")
    ap.add_argument("--placement", help="write {case: instances, on GPU, host-fallback nodes and their ops} "
                    "from the server's ready lines to this file")
    ap.add_argument("--load-timeout", type=float, default=120, help="seconds a load may take (default 120)")
    ap.add_argument("--shard", default="0/1", help="K/N: every N-th selected case from the K-th (default 0/1)")
    ap.add_argument("--deadline-s", type=float, help="start no case after this many seconds")
    a = ap.parse_args()
    m = re.fullmatch(r"(\d+)/(\d+)", a.shard)
    if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
        ap.error("--shard wants K/N with 0 <= K < N, got '%s'" % a.shard)
    if a.inferd and not os.access(a.inferd, os.X_OK):
        ap.error("--inferd: '%s' is not an executable file" % a.inferd)
    warnings.simplefilter("ignore")
    # a background job of a script starts with SIGINT ignored, and Python then keeps it so: SIGINT is how
    # gpu_run.sh stops a run that outlived its deadline (run(..., interruptible=True) reports the rest)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    runner = Ort(a.dir) if a.onnxruntime else \
        Inferd(a.dir, binary=a.inferd, placement=bool(a.placement), load_timeout=a.load_timeout)
    t0 = time.monotonic()
    results = run(a.dir, runner, read_list(a.only) if a.only else None, a.filter, a.verbose, a.servable_only,
                  (int(m.group(1)), int(m.group(2))), a.deadline_s, interruptible=True)
    report(results)
    print("\n%.0f s" % (time.monotonic() - t0))
    if a.write_pass:
        with open(a.write_pass, "w") as f:
            f.write("".join(c + "\n" for c in sorted(c for c, (r, _) in results.items() if r is None)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=0, sort_keys=True)
    if a.placement:
        with open(a.placement, "w") as f:
            json.dump(getattr(runner, "placement", {}), f, indent=0, sort_keys=True)


if __name__ == "__main__":
    main()
