#!/usr/bin/env python3
"""The conformance suite on GPU instances against the CPU plan (issue 34's done-when): reads what
gpu_run.sh's runs wrote into RESULTS (run.py's --json and --placement files) and writes beside them

    gpu_pass.txt, gpu_folded_pass.txt   the cases that pass on GPU instances (folded ones by their
                                        original names, as expected_pass_folded.txt lists them)
    gpu_regressed.txt                   every case the CPU passes (expected_pass.txt and
                                        expected_pass_folded.txt, and the device's own CPU run) that
                                        does not pass on GPU instances, with its reason and message
    gpu_host_fallback.txt               the passing cases whose GPU plan ran nodes on the host, with
                                        those nodes' op types
    summary.md                          the table for tests/bench/RESULTS.md

and prints the table. Exit status 0 when every case the CPU passes passes on GPU instances (directly or
through host fallback), 1 when not, 2 when a run's results are missing.

    gpu_summary.py RESULTS [--conf DIR] [--label TEXT]
"""

import argparse
import collections
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDED = "_folded"


def read_list(path):
    with open(path) as f:
        return {ln.split("#", 1)[0].strip() for ln in f} - {""}


def load_runs(results, stem):
    """{case: [reason, detail]} and {case: placement} merged over RESULTS/<stem>.json or its shards
    <stem>.<k>.json (and <stem>.<k>.placement.json); None when none was written."""
    paths = sorted(glob.glob(os.path.join(results, stem + ".json")) +
                   glob.glob(os.path.join(results, stem + ".[0-9]*.json")))
    paths = [p for p in paths if not p.endswith(".placement.json")]
    if not paths:
        return None, {}
    res, place = {}, {}
    for p in paths:
        with open(p) as f:
            res.update(json.load(f))
        pp = p[: -len(".json")] + ".placement.json"
        if os.path.exists(pp):
            with open(pp) as f:
                place.update(json.load(f))
    return res, place


def unfold(name):
    return name[: -len(FOLDED)] if name.endswith(FOLDED) else name


def passed(res):
    return {c for c, (r, _) in res.items() if r is None}


def summarize(results, conf=HERE, label=""):
    """Writes the files named in the module's doc; returns (exit status, the table's lines)."""
    runs = {}
    for stem in ("cpu", "cpu_folded", "gpu", "gpu_folded"):
        runs[stem] = load_runs(results, stem)
    missing = [s for s in ("gpu", "gpu_folded") if runs[s][0] is None]
    if missing:
        print("no results for: %s (in %s)" % (", ".join(missing), results), file=sys.stderr)
        return 2, []
    expected = read_list(os.path.join(conf, "expected_pass.txt"))
    expected_folded = read_list(os.path.join(conf, "expected_pass_folded.txt"))
    gpu, gplace = runs["gpu"]
    gpuf, gplace_f = runs["gpu_folded"]
    gpu_pass = passed(gpu)
    gpuf_pass = {unfold(c) for c in passed(gpuf)}
    cpu = runs["cpu"][0]
    cpuf = runs["cpu_folded"][0]
    cpu_pass = passed(cpu) if cpu is not None else set()
    cpuf_pass = {unfold(c) for c in passed(cpuf)} if cpuf is not None else set()

    # what the CPU passes: CI's lists, and whatever the device's own CPU run passes beyond them
    want = expected | cpu_pass
    want_f = expected_folded | cpuf_pass
    regressed = []  # (suite, case, why it is wanted, reason, detail)
    for c in sorted(want - gpu_pass):
        r, d = gpu.get(c, ("not in the GPU run", ""))
        regressed.append(("node tests", c, "expected_pass.txt" if c in expected else "device CPU run", r, d))
    for c in sorted(want_f - gpuf_pass):
        r, d = gpuf.get(c + FOLDED, ("not in the GPU run", ""))
        regressed.append(("folded", c, "expected_pass_folded.txt" if c in expected_folded else "device CPU run", r, d))

    # placement: on a GPU at all, with or without host nodes
    def split(pass_set, place, suffix=""):
        on_gpu, no_host, host = 0, 0, {}
        for c in pass_set:
            p = place.get(c + suffix) or {}
            if p.get("gpu", 0) < 1:
                continue
            on_gpu += 1
            if p.get("host_nodes", 0) == 0:
                no_host += 1
            else:
                host[c] = p
        return on_gpu, no_host, host
    on_gpu, no_host, host = split(gpu_pass, gplace)
    on_gpu_f, no_host_f, host_f = split(gpuf_pass, gplace_f, FOLDED)
    # a model the engine placed on the host as a whole (STRING inputs or outputs, engine/model.c) is served
    # by its KIND_GPU instances as the design says, so it is no unplaced pass
    def whole_host(p):
        return bool((p or {}).get("host_model"))
    host_model = sorted(c for c in gpu_pass if whole_host(gplace.get(c)))
    host_model += sorted(c + FOLDED for c in gpuf_pass if whole_host(gplace_f.get(c + FOLDED)))
    unplaced = sorted(c for c in gpu_pass if not (gplace.get(c) or {}).get("gpu") and not whole_host(gplace.get(c)))
    unplaced += sorted(c + FOLDED for c in gpuf_pass
                       if not (gplace_f.get(c + FOLDED) or {}).get("gpu") and not whole_host(gplace_f.get(c + FOLDED)))

    with open(os.path.join(results, "gpu_pass.txt"), "w") as f:
        f.write("".join(c + "\n" for c in sorted(gpu_pass)))
    with open(os.path.join(results, "gpu_folded_pass.txt"), "w") as f:
        f.write("".join(c + "\n" for c in sorted(gpuf_pass)))
    with open(os.path.join(results, "gpu_regressed.txt"), "w") as f:
        f.write("# cases the CPU passes that fail on GPU instances: suite, case, listed by, reason: message\n")
        for s, c, by, r, d in regressed:
            f.write("%s\t%s\t%s\t%s: %s\n" % (s, c, by, r, " ".join(str(d).split())[:400]))
    with open(os.path.join(results, "gpu_host_fallback.txt"), "w") as f:
        f.write("# passing cases whose GPU plan ran nodes on the host: case, nodes, op types\n")
        for c, p in sorted(host.items()) + sorted((c + FOLDED, p) for c, p in host_f.items()):
            f.write("%s\t%d\t%s\n" % (c, p["host_nodes"], "+".join(p.get("host_ops", []))))

    ops = collections.Counter(op for p in list(host.values()) + list(host_f.values()) for op in p.get("host_ops", []))
    reasons = collections.Counter(r for _, _, _, r, _ in regressed)
    # cases the run's deadline or its hard stop (timeout -s INT) left
    deadline = sum(1 for r, _ in list(gpu.values()) + list(gpuf.values()) if (r or "").startswith("not run"))
    n_gpu, n_gpuf = len(gpu), len(gpuf)
    lines = [
        "ONNX node tests on GPU instances%s" % (" (" + label + ")" if label else ""),
        "",
        "| suite | cases | CPU plan passes | GPU instances pass | of those on a GPU | of those no host fallback "
        "| of those through host fallback | CPU passes that fail on GPU |",
        "|---|---|---|---|---|---|---|---|",
        "| node tests | %d | %s (expected_pass.txt %d) | %d | %d | **%d** | %d | %d |"
        % (n_gpu, len(cpu_pass) if cpu is not None else "not run", len(expected), len(gpu_pass), on_gpu, no_host,
           len(host), sum(1 for x in regressed if x[0] == "node tests")),
        "| parameters folded | %d | %s (expected_pass_folded.txt %d) | %d | %d | **%d** | %d | %d |"
        % (n_gpuf, len(cpuf_pass) if cpuf is not None else "not run", len(expected_folded), len(gpuf_pass),
           on_gpu_f, no_host_f, len(host_f), sum(1 for x in regressed if x[0] == "folded")),
        "",
    ]
    if ops:
        lines.append("Host fallback in passing cases, by op type (cases): "
                     + ", ".join("%s %d" % (o, n) for o, n in ops.most_common()))
    if reasons:
        lines.append("CPU passes failing on GPU, by reason: "
                     + ", ".join("%s %d" % (r, n) for r, n in reasons.most_common()))
    if host_model:
        lines.append("Passing on the host as a whole (GPU instances of a model with STRING inputs or outputs): %d, "
                     "e.g. %s" % (len(host_model), ", ".join(host_model[:5])))
    if unplaced:
        lines.append("Passing without a GPU instance in the ready line (not a GPU pass): %d, e.g. %s"
                     % (len(unplaced), ", ".join(unplaced[:5])))
    if deadline:
        lines.append("Not run (the run's deadline or hard stop came first): %d cases" % deadline)
    # a pass the ready line does not place on a GPU proves nothing about the GPU plan
    ok = not regressed and not deadline and not unplaced
    lines.append("Done-when (every case the CPU plan passes also passes on GPU instances): %s"
                 % ("MET" if ok else "NOT MET (%d CPU passes fail on GPU: gpu_regressed.txt; %d passes not placed "
                                     "on a GPU)" % (len(regressed), len(unplaced))))
    with open(os.path.join(results, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return (0 if ok else 1), lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="the folder run.py's --json and --placement files went to")
    ap.add_argument("--conf", default=HERE, help="where expected_pass.txt and expected_pass_folded.txt are")
    ap.add_argument("--label", default="", help="a note for the table's title (machine, commit)")
    a = ap.parse_args()
    rc, lines = summarize(a.results, a.conf, a.label)
    print("\n".join(lines))
    if rc == 1:
        with open(os.path.join(a.results, "gpu_regressed.txt")) as f:
            body = f.read().splitlines()[1:]
        print("\nCPU passes failing on GPU instances (%d; the first 25, all in gpu_regressed.txt):" % len(body))
        print("\n".join("  " + ln[:300] for ln in body[:25]))
    sys.exit(rc)


if __name__ == "__main__":
    main()
