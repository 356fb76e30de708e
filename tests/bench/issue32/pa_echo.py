#!/usr/bin/env python3
"""pa_echo.sh's helpers (README.md beside this file).

  pa_echo.py args CONFIG   bench_fixed_server's flags for the model of a config.pbtxt that repo.py wrote:
                           --model NAME --max-batch N --input NAME:TYPE:D,D ... --output NAME:TYPE:D,D ...
  pa_echo.py table OUT     the markdown table from OUT (pa_echo.sh's files)
"""
import csv
import json
import os
import re
import sys

NAMES = {"resnet50": ("ResNet-50", "img/s"), "bert_base": ("BERT-base s128", "seq/s")}
TENSOR = re.compile(r'\{\s*name:\s*"([^"]+)"\s+data_type:\s*(\w+)\s+dims:\s*\[([^\]]*)\]\s*\}')


def section(text, key):
    """The body of `key [ ... ]` (one level of braces inside)."""
    m = re.search(r"\b%s\s*\[((?:[^\[\]]|\[[^\]]*\])*)\]" % key, text)
    return m.group(1) if m else ""


def fixed_args(path):
    text = open(path).read()
    name = re.search(r'^name:\s*"([^"]+)"', text, re.M).group(1)
    mb = re.search(r"max_batch_size:\s*(\d+)", text)
    args = ["--model", name, "--max-batch", mb.group(1) if mb else "0"]
    for key, flag in (("input", "--input"), ("output", "--output")):
        for tname, dtype, dims in TENSOR.findall(section(text, key)):
            dims = ",".join(d.strip() for d in dims.split(",") if d.strip())
            args += [flag, "%s:%s:%s" % (tname, dtype, dims)]
    return args


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def load_rate(out, tag):
    try:
        with open(os.path.join(out, tag + ".json")) as f:
            return json.load(f)[0]["rows_per_s"], None
    except (OSError, ValueError, KeyError, IndexError):
        rc = (read(os.path.join(out, tag + ".rc")) or "").strip()
        return None, "not run" if not rc else "failed (exit %s)" % rc


def pa_rate(out, tag):
    skipped = read(os.path.join(out, tag + ".skipped"))
    if skipped:
        return None, skipped.strip()
    text = read(os.path.join(out, tag + ".csv"))
    if text:
        for row in csv.DictReader(text.splitlines()):
            if row.get("Inferences/Second"):
                return float(row["Inferences/Second"]), (read(os.path.join(out, tag + ".conns")) or "?").strip()
    rc = (read(os.path.join(out, tag + ".rc")) or "").strip()
    return None, "timed out" if rc in ("124", "137") else "not run" if not rc else "failed (exit %s)" % rc


def num(x):
    return "{:,.0f}".format(x)


def ratio(a, b):
    return "%.2f" % (a / b) if a is not None and b else ""


def table(out):
    machine = (read(os.path.join(out, "machine.txt")) or "").strip().splitlines()
    conc = (re.findall(r"CONC=(\d+)", " ".join(machine)) or ["256"])[0]
    conns = (re.findall(r"CONNS=(\d+)", " ".join(machine)) or ["8"])[0]
    print("### perf_analyzer against the bare yardstick and against inferd (tests/bench/issue32/pa_echo.sh)\n")
    for l in machine:
        print("    " + l)
    print()
    print("c%s over gRPC, one row per request. yardstick = bench_fixed_server (metadata/config/statistics of the "
          "model, every ModelInfer read whole and answered with one fixed reply of the model's output size).\n" % conc)
    print("| model | client (c%s, gRPC) | on the yardstick | on inferd | inferd / yardstick | / inferd-load on inferd "
          "| issue 32 goal |" % conc)
    print("|---|---|---|---|---|---|---|")
    for m, (label, unit) in NAMES.items():
        if not any(os.path.exists(os.path.join(out, m + s)) for s in ("_fixed.log", "_inferd.log")):
            continue
        li, liw = load_rate(out, m + "_inferd_load")
        lf, lfw = load_rate(out, m + "_fixed_load")
        print("| %s | inferd-load, %s connections | %s | %s | %s | 1.00 | |" % (
            label, conns, ("%s %s" % (num(lf), unit)) if lf else lfw, ("%s %s" % (num(li), unit)) if li else liw,
            ratio(li, lf)))
        for tag, what in (("pa", "perf_analyzer (sync)"), ("paa", "perf_analyzer --async")):
            pf, pfc = pa_rate(out, "%s_fixed_%s" % (m, tag))
            pi, pic = pa_rate(out, "%s_inferd_%s" % (m, tag))
            if pf is None and pi is None and pfc == "not run" and pic == "not run":
                continue
            cell = lambda v, x: ("%s %s (%s conns)" % (num(v), unit, x)) if v is not None else x  # noqa: E731
            goal = ""
            if tag == "pa" and pi is not None and li:
                r, ry = pi / li, (pi / pf if pf else None)
                goal = ">= 0.8 of inferd-load: %s" % ("met" if r >= 0.8 else "**not met**")
                if ry is not None:
                    goal += "; or within 0.9 of the yardstick (%s of inferd-load): %s" % (
                        ratio(pf, li), "met" if ry >= 0.9 else "**not met**")
            print("| %s | %s | %s | %s | %s | %s | %s |" % (label, what, cell(pf, pfc), cell(pi, pic), ratio(pi, pf),
                                                        ratio(pi, li), goal))
    mlp = read(os.path.join(out, "mlp", "transport.md"))
    if mlp:
        print("\n#### The seed MLP against the anchors' echo (tests/bench/serve_gpu/transport.sh)\n")
        print(mlp.rstrip())
    elif os.path.exists(os.path.join(out, "mlp.txt")):
        print("\nThe seed MLP sweep left no table; mlp.txt's tail:\n")
        for l in (read(os.path.join(out, "mlp.txt")) or "").splitlines()[-8:]:
            print("    " + l)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "args":
        print(" ".join(fixed_args(sys.argv[2])))
    elif len(sys.argv) == 3 and sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
