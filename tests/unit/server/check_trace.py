"""tests/unit/server/check_trace.py: parses a trace written by
`test_trace --write PATH` with Python's json module (strict UTF-8) and checks
that client strings round-trip and every event has the fields Perfetto and
chrome://tracing need.

usage: check_trace.py <test_trace binary>
"""
import json
import os
import subprocess
import sys
import tempfile

NASTY = {
    'req-"quoted"': 'req-"quoted"',
    "back\\slash": "back\\slash",
    "ctl\x01\x1f\n\t": "ctl\x01\x1f\n\t",
    "bad\ufffd\ufffd utf8": "bad\\xff\\xfe utf8 with each bad byte replaced",
    "ok \u00e9\u20ac": "ok e-acute euro",
}
STAGES = {"request", "queue", "compute_input", "compute_infer", "compute_output"}
PER_THREAD, THREADS = 200, 4


def main():
    binary = sys.argv[1]
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        subprocess.run([binary, "--write", path], check=True)
        with open(path, "rb") as f:
            raw = f.read()
    text = raw.decode("utf-8")  # strict: raises on invalid UTF-8
    events = json.loads(text)
    check(isinstance(events, list), "top level is an array")

    spans = [e for e in events if e.get("ph") == "X"]
    meta = [e for e in events if e.get("ph") == "M"]
    check(len(spans) == len(NASTY) + 1 + THREADS * PER_THREAD,
          f"span count {len(spans)}")
    check(len(spans) + len(meta) == len(events), "only X and M events")
    for e in spans:
        for k, typ in (("name", str), ("ts", int), ("dur", int), ("pid", int), ("tid", int),
                       ("args", dict)):
            check(isinstance(e.get(k), typ), f"span field {k} in {e}")
        check(e["name"] in STAGES, f"stage name {e['name']}")
        check(e["dur"] >= 0, f"dur >= 0 in {e}")
        a = e["args"]
        for k in ("batch_id", "batch_size", "instance", "stream", "device"):
            check(isinstance(a.get(k), int), f"args.{k} in {e}")
        for k in ("model", "version", "request_id"):
            check(isinstance(a.get(k), str), f"args.{k} in {e}")

    ids = [e["args"]["request_id"] for e in spans if e["pid"] == 9]
    check(ids == list(NASTY), f"nasty request ids round-trip: {ids!r}")
    check(all(e["args"]["model"] == 'm"x' for e in spans if e["pid"] == 9), "model escaped")
    long_ids = [e["args"]["request_id"] for e in spans if e["pid"] == 8]
    check(long_ids == ["L" * 256], "long request id cut at PROF_TRACE_STR_MAX")
    thread_ids = {e["args"]["request_id"] for e in spans if e["pid"] in (0, 1)}
    check(len(thread_ids) == THREADS * PER_THREAD, "every threaded span present once")

    names = {(e["name"], e["pid"], e["tid"]): e["args"]["name"] for e in meta}
    check(names.get(("thread_name", 9, 9)) == 'named "thread"', "explicit thread name")
    check(names.get(("process_name", 9, 0)) == "named process", "explicit process name")
    check(names.get(("process_name", 0, 0)) == "mlp v1", "automatic process name")
    check(names.get(("thread_name", 1, 1)) == "instance 1 (GPU 0)", "automatic GPU thread name")
    check(names.get(("thread_name", 8, 0)) == "requests", "automatic requests track name")
    check(len(names) == len(meta), "no track named twice")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(events)} events, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
