"""Runs cases.json (written by tests/gpu/types_bundle.py) against a server on a GPU machine, with
the standard library alone (KServe v2 REST with binary tensors both ways): every model either
answers its expected bytes (integers and bools exactly, floats within FP32 rounding) or is refused
cleanly (not ready: its load failed; or an error status naming the type): never a wrong answer.
Cases marked `must` have to answer. Usage: python types_check.py HOST:PORT cases.json. Exit 1 on a
wrong answer or a `must` case refused."""

import base64
import http.client
import json
import struct
import sys

FMT = {"INT8": "b", "INT16": "h", "INT32": "i", "INT64": "q", "UINT8": "B", "UINT16": "H", "UINT32": "I",
       "UINT64": "Q", "FP16": "e", "FP32": "f", "FP64": "d", "BOOL": "?"}
RTOL = {"FP16": 2e-3, "FP32": 1e-6, "FP64": 1e-6}


def infer(conn, case):
    raw = [base64.b64decode(t["b64"]) for t in case["inputs"]]
    head = {"inputs": [{"name": t["name"], "datatype": t["datatype"], "shape": t["shape"],
                        "parameters": {"binary_data_size": len(r)}} for t, r in zip(case["inputs"], raw)],
            "outputs": [{"name": o["name"], "parameters": {"binary_data": True}} for o in case["outputs"]]}
    h = json.dumps(head).encode()
    conn.request("POST", "/v2/models/%s/infer" % case["model"], h + b"".join(raw),
                 {"Inference-Header-Content-Length": str(len(h)), "Content-Type": "application/octet-stream"})
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        return r.status, body.decode(errors="replace"), None
    n = int(r.getheader("Inference-Header-Content-Length", len(body)))
    meta = json.loads(body[:n])
    out, off = {}, n
    for o in meta["outputs"]:
        size = o["parameters"]["binary_data_size"]
        out[o["name"]] = (o["datatype"], body[off:off + size])
        off += size
    return 200, "", out


def same(dt, got, want):
    if dt not in RTOL:
        return got == want
    f = "<%d%s" % (len(want) // struct.calcsize(FMT[dt]), FMT[dt])
    if len(got) != len(want):
        return False
    for g, w in zip(struct.unpack(f, got), struct.unpack(f, want)):
        if not (g == w or (g != g and w != w) or abs(g - w) <= RTOL[dt] * (1 + abs(w))):
            return False
    return True


def main(addr, path):
    cases = json.load(open(path))
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    answered, refused, wrong, must_refused = 0, [], [], []
    for c in cases:
        conn.request("GET", "/v2/models/%s/ready" % c["model"])
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            refused.append((c["model"], "not ready"))
            (must_refused if c["must"] else []).append(c["model"])
            continue
        status, msg, out = infer(conn, c)
        if status != 200:
            refused.append((c["model"], "%d %s" % (status, msg[:160])))
            (must_refused if c["must"] else []).append(c["model"])
            continue
        for o in c["outputs"]:
            dt, got = out[o["name"]]
            want = base64.b64decode(o["b64"])
            if dt != o["datatype"] or not same(dt, got, want):
                wrong.append((c["model"], o["name"], dt))
        answered += 1
    for m, why in refused:
        print("refused %s: %s" % (m, why))
    print("answered %d, refused %d, wrong %d, must-answer refused %d of %d cases"
          % (answered, len(refused), len(wrong), len(must_refused), len(cases)))
    for w in wrong:
        print("WRONG", w)
    for m in must_refused:
        print("MUST ANSWER", m)
    return 1 if wrong or must_refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
