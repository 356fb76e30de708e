#!/usr/bin/env python3
"""The table of tests/bench/issue32/run.sh: reads its OUT folder and prints one markdown section for
tests/bench/RESULTS.md: every figure of issue 32's done-when list that the call measured, its ratio and the goal.

    table.py OUT [CONC]

Reads offline.jsonl (PyTorch's best offline rate), <model>_{grpc,shm}.json and resnet50_cold.json (inferd-load
--json; the cold run's per-second periods), <model>_pa_{grpc,shm,cuda}.{csv,rc,conns,skipped} (perf_analyzer),
<model>_metrics_*.txt, <model>.ready_s, <model>_server.log and machine.txt. A figure that is missing says why.
"""

import csv
import json
import os
import re
import sys

NAMES = {"resnet50": ("ResNet-50", "img/s"), "bert_base": ("BERT-base s128", "seq/s")}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def load_json(path):
    text = read(path)
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc[0] if isinstance(doc, list) and doc else None


def num(x):
    return "{:,.0f}".format(x)


def ratio(x, y):
    return x / y if x is not None and y else None


def fr(r):
    return "-" if r is None else "%.2f" % r


def verdict(r, goal):
    if r is None:
        return "not measured"
    return "met" if r >= goal else "**not met**"


class Out:
    def __init__(self, d):
        self.d = d

    def p(self, name):
        return os.path.join(self.d, name)

    def offline(self):
        rows = {}
        for line in (read(self.p("offline.jsonl")) or "").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            rows[r.get("model")] = r
        return rows

    def load(self, tag):
        """(rows/s, the level's JSON) of an inferd-load run, or (None, why)."""
        j = load_json(self.p(tag + ".json"))
        if j is None:
            rc = (read(self.p(tag + ".rc")) or "").strip()
            return None, "not run" if not rc else "failed (exit %s)" % rc
        return j["rows_per_s"], j

    def pa(self, tag):
        """(infer/s, connections) of a perf_analyzer run, or (None, why)."""
        skipped = read(self.p(tag + ".skipped"))
        if skipped:
            return None, skipped.strip()
        rc = (read(self.p(tag + ".rc")) or "").strip()
        text = read(self.p(tag + ".csv"))
        if text:
            for row in csv.DictReader(text.splitlines()):
                v = row.get("Inferences/Second")
                if v:
                    return float(v), (read(self.p(tag + ".conns")) or "?").strip()
        if rc == "124" or rc == "137":
            return None, "timed out"
        return None, "not run" if not rc else "failed (exit %s)" % rc


def server_part(j):
    """Mean batch and per-batch server times from inferd-load --server-stats."""
    if not isinstance(j, dict) or j.get("server_avg_batch") is None:
        return ""
    b = j["server_avg_batch"]
    parts = ["batch %.1f" % b]
    us = [j.get(k) for k in ("server_queue_us", "server_compute_input_us", "server_compute_infer_us",
                             "server_compute_output_us")]
    if None not in us:
        # every request of a batch is charged the batch's whole compute times (as Triton does), so the mean per
        # request is the mean per batch; queue is each request's own wait
        parts.append("queue %.1f ms; per batch in %.1f / infer %.1f / out %.1f ms" % tuple(x / 1e3 for x in us))
    return " (" + "; ".join(parts) + ")"


def cold(o):
    j = load_json(o.p("resnet50_cold.json"))
    if j is None or not j.get("periods"):
        return None
    per = [(p["start_s"], p["valid"]["ok"] / p["seconds"]) for p in j["periods"] if p["seconds"] > 0]
    dur = j.get("duration_s") or (per[-1][0] + 1 if per else 0)
    half = round(dur / 2)
    first = [r for s, r in per if s < half]
    last = [r for s, r in per if s >= half]
    if not first or not last:
        return None
    f, s = sum(first) / len(first), sum(last) / len(last)
    return {"half": half, "first": f, "last": s, "first_s": per[0][1], "per": per}


def main():
    o = Out(sys.argv[1])
    machine = (read(o.p("machine.txt")) or "").strip().splitlines()
    sets = dict(re.findall(r"\b(CONC|CONNS)=(\d+)", " ".join(machine)))
    conc = sys.argv[2] if len(sys.argv) > 2 else sets.get("CONC", "256")
    lead = "%s connections, %s in flight, one row each" % (sets.get("CONNS", "8"), conc)
    off = o.offline()
    print("### Issue 32's done-when figures in one call (tests/bench/issue32/run.sh)\n")
    for l in machine:
        print("    " + l)
    print()
    print("| model | client, path | inferd | / PyTorch offline | other ratio | goal (issue 32) |")
    print("|---|---|---|---|---|---|")
    notes = []
    for m, (label, unit) in NAMES.items():
        t = off.get(m)
        if t and "per_s" in t:
            torch_rate = t["per_s"]
            how = "%s, %s, batch %d%s" % (t["tool"], t["precision"], t["batch"],
                                           ", channels_last" if t.get("channels_last") else "")
            print("| %s | %s (%s) | %s %s | 1.00 | | |" % (
                label, "PyTorch best offline" if t["tool"].startswith("torch") else "offline yardstick (dry run)", how,
                num(torch_rate), unit))
        else:
            torch_rate = None
            why = (t or {}).get("error", "not measured (see offline.log)")
            print("| %s | PyTorch best offline | %s | | | |" % (label, why))
        if not os.path.exists(o.p(m + "_server.log")):
            print("| %s | (served) | not run | | | |" % label)
            continue
        grpc, gj = o.load(m + "_grpc")
        shm, sj = o.load(m + "_shm")
        g_goal = 0.9 if m == "resnet50" else 1.0
        r = ratio(grpc, torch_rate)
        print("| %s | inferd-load gRPC, %s | %s | %s | | >= %.2f of PyTorch: %s |" % (
            label, lead,
            (num(grpc) + " " + unit + server_part(gj)) if grpc else gj, fr(r), g_goal, verdict(r, g_goal)))
        r = ratio(shm, torch_rate)
        goal = "; >= 0.95 of PyTorch: %s" % verdict(r, 0.95) if m == "resnet50" else ""
        print("| %s | inferd-load system shared memory, %s | %s | %s | %s vs gRPC | %s |" % (
            label, lead, (num(shm) + " " + unit + server_part(sj)) if shm else sj, fr(r), fr(ratio(shm, grpc)),
            goal.lstrip("; ")))
        cud, cj = o.load(m + "_cudashm")
        if cud is not None or cj != "not run":
            r = ratio(cud, shm)
            print("| %s | inferd-load CUDA shared memory, %s | %s | %s | %s vs system shm | >= 1.0 of system shm: %s |" % (
                label, lead, (num(cud) + " " + unit + server_part(cj)) if cud else cj, fr(ratio(cud, torch_rate)),
                fr(r), verdict(r, 1.0)))
        if m == "resnet50":
            c = cold(o)
            if c:
                r = ratio(c["first"], c["last"])
                print("| %s | cold start, inferd-load gRPC from ready: first %d s / last %d s (first second %s) "
                      "| %s / %s %s | | %s first / last | >= 0.8: %s |" % (
                          label, c["half"], c["half"], num(c["first_s"]), num(c["first"]), num(c["last"]), unit,
                          fr(r), verdict(r, 0.8)))
                notes.append("ResNet-50 cold run, %s per second from ready: %s" % (
                    unit, ", ".join(num(x) for _, x in c["per"])))
            else:
                print("| %s | cold start | %s | | | >= 0.8: not measured |" % (label, o.load("resnet50_cold")[1]))
        pa = {}
        for shmk, what, base, base_name in (("grpc", "gRPC", grpc, "inferd-load gRPC"),
                                            ("shm", "system shared memory", shm, "inferd-load system shm"),
                                            ("cuda", "CUDA shared memory", None, None)):
            v, extra = o.pa("%s_pa_%s" % (m, shmk))
            pa[shmk] = v
            if v is None and extra == "not run" and shmk == "cuda":
                continue
            if shmk == "cuda":
                rr, rname = ratio(v, pa.get("shm")), "vs perf_analyzer system shm"
                goal = ">= 1.0 of system shm: %s" % verdict(rr, 1.0)
            else:
                rr, rname = ratio(v, base), "vs " + base_name
                goal = ">= 0.8 of inferd-load: %s" % verdict(rr, 0.8) if shmk == "grpc" else ""
            print("| %s | perf_analyzer c%s, %s%s | %s | %s | %s %s | %s |" % (
                label, conc, what,
                ", %s connections" % extra if v is not None else "",
                (num(v) + " " + unit) if v is not None else extra, fr(ratio(v, torch_rate)), fr(rr),
                rname if rr is not None else "", goal))
    print()
    for m, (label, _) in NAMES.items():
        rs = read(o.p(m + ".ready_s"))
        log = read(o.p(m + "_server.log")) or ""
        prep = [l.strip() for l in log.splitlines() if "prepared in" in l][:2]
        if rs:
            print("- %s: ready %s s after the server started%s" % (
                label, rs.strip(), "; " + " / ".join(re.sub(r"^\S+ \S+ ", "", p) for p in prep) if prep else ""))
        for when in ("cold", "end"):
            text = read(o.p("%s_metrics_%s.txt" % (m, when)))
            if text is None:
                continue
            keep = []
            for l in text.splitlines():
                mm = re.match(r'(\w+)\{([^}]*)\} (\S+)', l)
                if not mm or mm.group(1) not in ("inferd_lazy_prepares_total", "inferd_lazy_prepare_causes_total",
                                                 "inferd_padded_batches_total"):
                    if not mm:
                        keep.append(l.strip())
                    continue
                cause = re.search(r'cause="(\w+)"', mm.group(2))
                keep.append("%s%s %s" % (mm.group(1).replace("inferd_", "").replace("_total", ""),
                                         "[%s]" % cause.group(1) if cause else "", mm.group(3)))
            print("- %s /metrics %s: %s" % (label, "after the cold run" if when == "cold" else "at the end",
                                            ", ".join(keep) or "none"))
    cs = read(o.p("coldstart.txt"))
    if cs:
        keep = [l.strip() for l in cs.splitlines() if re.search(r"ready .* after start|ratio|lazy_prepare|padded_b", l)]
        notes.append("coldstart/run.sh in its own setting (1 instance, max_batch 256, budget 60): " +
                     ("; ".join(keep) if keep else "no result (coldstart.txt)"))
    for n in notes:
        print("- " + n)
    print("- not measured here: the seed MLP transport figures and perf_analyzer against the bare yardstick "
          "(tests/bench/issue32/pa_echo.sh); the one-connection echo yardstick (tests/bench/conn/run.sh)")


if __name__ == "__main__":
    main()
