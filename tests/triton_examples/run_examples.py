#!/usr/bin/env python3
"""Runs Triton's own Python client examples, unmodified, against inferd serving stand-ins for
Triton's example model repository (issue 33), and prints one row per example: PASS, FAIL or SKIP,
and the first error line.

    python tests/triton_examples/run_examples.py [--expect FILE] [--only NAME ...] [--json FILE]

The examples come from fetch_examples.sh (exit 77 from it: they are unavailable, and so is this
run: exit 77). The server is $INFERD_BIN (default build/bin/inferd); the examples run with this
interpreter, which must have tritonclient (the repository's .venv does).

Each example is given only what Triton's docs give it: -u with our port (gRPC or HTTP, whichever
its default URL names), and for the image clients a model, a scaling and an image we draw here.
Servers, on free ports, one after the other:
  main      Triton's 8 example models, default model control, client shared memory allowed
  control   the same repository in explicit mode, nothing loaded (the model-control examples
            load and unload themselves, and count the repository's models: 8)
  extras    the ensemble, custom_identity_int32 and repeat_int32 (gen_repo.py --extras)
  fixed     extras on ports 8000/8001 inside a private network namespace (unshare -n), for
            memory_growth_test.py, whose URL is fixed; SKIP where no namespace can be made and
            the ports are taken
--probe looks past the first missing pieces to the next ones: simple, simple_int8, simple_string and the
sequence models compute in INT64 (gen_repo.py --probe) and the servers' readiness is not strict. Its table is a map
of what an example meets next, not a result: --expect refuses it.
Exit status: 0 with the table, whatever passed; with --expect FILE (names, one a line, # comments)
1 when an example listed there did not PASS (a SKIP counts as not run, not as a regression) or a
server misbehaved (exit other than 0 after SIGTERM, a sanitizer report);
77 when the examples are unavailable.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
READY_RE = re.compile(r"inferd ready: grpc=(\d+) http=(\d+)")
SKIP_EXIT = 77
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer")

# Arguments beyond -u, as Triton's quick start runs these (image_client.py -m densenet_onnx -c 3
# -s INCEPTION mug.jpg); IMAGE is replaced by the image this script draws.
EXTRA_ARGS = {
    "image_client.py": ["-m", "densenet_onnx", "-c", "3", "-s", "INCEPTION", "IMAGE"],
    "grpc_image_client.py": ["-m", "densenet_onnx", "-c", "3", "-s", "INCEPTION", "IMAGE"],
    "ensemble_image_client.py": ["-c", "3", "IMAGE"],
}
SERVER_OF = {
    "simple_grpc_model_control.py": "control",
    # Triton's two model-control examples count the repository index: the gRPC one 8 models (Triton's
    # example repository today), the HTTP one 7 (written before simple_identity joined it, so it fails
    # against Triton's own repository of today). Each is served the repository it was written for.
    "simple_http_model_control.py": "control7",
    "ensemble_image_client.py": "extras",
    "simple_grpc_custom_repeat.py": "extras",
    "memory_growth_test.py": "fixed",
}
VERDICT_RE = re.compile(r"^(FAILED|improper|incorrect|Expect|expected|\[ expected \])")
ERROR_RE = re.compile(r"fail|error|expect|incorrect|unknown|unavailable|invalid|not |refused|"
                      r"exception|mismatch|wrong|unsupported", re.I)


# --- the server

class Server:
    """One inferd; its stderr drained by a thread (kept for the table's load summary)."""

    def __init__(self, binary, repo, args, grpc_port=0, http_port=0):
        self.cmd = [binary, "--model-repository", repo, "--grpc-port", str(grpc_port),
                    "--http-port", str(http_port), "--grpc-threads", "2"] + list(args)
        self.lines, self.ready = [], threading.Event()
        self.grpc = self.http = None

    def start(self, timeout=60):
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace")
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(timeout) or self.grpc is None:
            self.stop()
            raise RuntimeError("inferd did not start: %s" % " | ".join(self.lines[-5:]))
        return self

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            m = READY_RE.search(line)
            if m:
                self.grpc, self.http = int(m.group(1)), int(m.group(2))
                self.ready.set()
        self.ready.set()

    def load_failures(self):
        return [re.sub(r"^\S+ \S+ inferd\] ", "", l) for l in self.lines
                if re.match(r"^E\S* .*model '[^']*' (version \d+ failed to load|is not ready)", l)]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def problems(self):
        """What is wrong with the server itself: an exit other than 0 after SIGTERM, sanitizer reports."""
        bad = [l for l in self.lines if any(m in l for m in SANITIZER_MARKERS)]
        if self.proc.returncode != 0:
            bad.insert(0, "inferd exited with %s" % self.proc.returncode)
        return bad


# --- one example

def first_error(out):
    """The line that says why: a traceback's last line, else the first line that reads as an error."""
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    for l in lines:  # the example's own verdict, before the traceback of its failure path (which may be a bug)
        if VERDICT_RE.search(l):
            return l
    for l in lines:  # grpc's _InactiveRpcError: its details line is the server's message
        m = re.match(r'^details = "(.*)"$', l)
        if m:
            return m.group(1)
    if any(l.startswith("Traceback") for l in lines):
        tb = [l for l in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b", l)]
        if tb:
            return tb[-1]
    for l in lines:
        if ERROR_RE.search(l) and not l.startswith("PASS"):
            return l
    return lines[-1] if lines else "(no output)"


def run_example(python, path, url, extra, timeout, env=None):
    name = os.path.basename(path)
    cmd = [python, path] + (["-u", url] if url else []) + extra
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", timeout=timeout, cwd=os.path.dirname(path),
                           env=env)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return {"example": name, "status": "FAIL", "why": "timed out after %ds" % timeout,
                "output": out, "secs": timeout}
    bad = (rc != 0 or "Traceback" in out
           or any(l.startswith(("FAILED", "context creation failed", "incorrect")) for l in out.splitlines()))
    return {"example": name, "status": "FAIL" if bad else "PASS",
            "why": ("exit %d: " % rc if rc else "") + first_error(out) if bad else "",
            "output": out, "secs": round(time.monotonic() - t0, 1)}


def url_kind(path):
    """'grpc' or 'http', from the port of the script's default -u URL; None when it has no -u."""
    text = open(path).read()
    m = re.search(r'"--url",.*?default="[^"]*?:(\d+)"', text, re.S)
    if not m:
        return None
    return "grpc" if m.group(1) == "8001" else "http"


# --- the image the image clients classify

def draw_image(path):
    # Our own picture (a colour gradient): what it shows does not matter to random-weight stand-ins.
    import numpy as np
    from PIL import Image
    y, x = np.mgrid[0:240, 0:320]
    rgb = np.stack([x * 255 // 319, y * 255 // 239, (x + y) * 255 // 558], axis=-1).astype(np.uint8)
    Image.fromarray(rgb, "RGB").save(path, "JPEG")


# --- a client dependency the venv lacks

ATTRDICT_SHIM = '''"""Written by inferd's tests/triton_examples/run_examples.py: a stand-in for the attrdict package,
which image_client.py imports to read HTTP metadata (Triton's docs pip-install it; it is unmaintained
and its last release fails to import on Python 3.10 and later)."""


def _wrap(v):
    if isinstance(v, dict):
        return AttrDict(v)
    if isinstance(v, list):
        return [_wrap(x) for x in v]
    return v


class AttrDict(dict):
    def __init__(self, d=None):
        super().__init__((k, _wrap(v)) for k, v in (d or {}).items())

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None

    def __setattr__(self, k, v):
        self[k] = v
'''


def example_env(work):
    """The examples' environment: this one, plus the attrdict stand-in where attrdict is missing."""
    env = dict(os.environ)
    if subprocess.run([sys.executable, "-c", "import attrdict"], stderr=subprocess.DEVNULL).returncode != 0:
        d = os.path.join(work, "pydeps", "attrdict")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "__init__.py"), "w") as f:
            f.write(ATTRDICT_SHIM)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(d), env.get("PYTHONPATH")]))
    return env


# --- server groups

def ports_free(*ports):
    for p in ports:
        s = socket.socket()
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("0.0.0.0", p))
        except OSError:
            return False
        finally:
            s.close()
    return True


def run_group(a, group, names, repos, image, fixed=False):
    strict = ["--strict-readiness", "false"] if a.probe else []
    repo, args = {"main": (repos["main"], ["--allow-client-shm", "true"]),
                  "control": (repos["main"], ["--model-control-mode", "explicit"]),
                  "control7": (repos["main7"], ["--model-control-mode", "explicit"]),
                  "extras": (repos["extras"], []),
                  "fixed": (repos["extras"], [])}[group]
    args = args + strict
    ports = (8001, 8000) if fixed else (0, 0)
    results = []
    try:
        srv = Server(a.inferd, repo, args, *ports).start()
    except RuntimeError as e:
        return ([{"example": n, "status": "FAIL", "why": str(e), "output": "", "secs": 0} for n in names], [],
                [str(e)])
    try:
        for n in names:
            path = os.path.join(a.examples, n)
            kind = url_kind(path)
            url = None if kind is None else "localhost:%d" % (srv.grpc if kind == "grpc" else srv.http)
            extra = [image if x == "IMAGE" else x for x in EXTRA_ARGS.get(n, [])]
            results.append(run_example(sys.executable, path, url, extra, a.timeout, a.env))
    finally:
        srv.stop()
    return results, srv.load_failures(), srv.problems()


def run_fixed(a, names, repos, image):
    """memory_growth_test.py: its URL is localhost:8000 in the code, so its server must have that port.
    A private network namespace gives it one always; else the host's, when free."""
    if shutil.which("unshare") and shutil.which("ip"):
        child = ["unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
                 sys.executable, os.path.abspath(__file__), "--in-netns", "--examples", a.examples,
                 "--inferd", a.inferd, "--timeout", str(a.timeout), "--repo-main", repos["main"],
                 "--repo-extras", repos["extras"], "--image", image] + (["--probe"] if a.probe else []) + names
        p = subprocess.run(child, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode == 0:
            got = json.loads(p.stdout.strip().splitlines()[-1])
            return got["results"], got["load_failures"], got["problems"]
    if ports_free(8000, 8001):
        return run_group(a, "fixed", names, repos, image, fixed=True)
    return [{"example": n, "status": "SKIP", "output": "", "secs": 0,
             "why": "its URL is fixed at localhost:8000/8001: no private network namespace here and the "
                    "ports are taken"} for n in names], [], []


# --- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", default=os.path.join(HERE, "vendor"),
                    help="folder of Triton's examples (default: vendor/, refreshed by fetch_examples.sh)")
    ap.add_argument("--inferd", default=os.environ.get("INFERD_BIN", os.path.join(ROOT, "build", "bin", "inferd")))
    ap.add_argument("--timeout", type=int, default=60, help="seconds each example may take (default 60)")
    ap.add_argument("--expect", help="file of examples that must PASS; exit 1 when one does not")
    ap.add_argument("--json", help="also write the results (with each example's output) to this file")
    ap.add_argument("--verbose", action="store_true", help="print each failing example's output")
    ap.add_argument("--probe", action="store_true",
                    help="INT64 stand-ins for the INT32 arithmetic, readiness not strict: what comes next")
    ap.add_argument("only", nargs="*", help="run only these examples (file names)")
    # The child run_fixed starts inside the namespace; it prints its results as one JSON line.
    ap.add_argument("--in-netns", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--repo-main", help=argparse.SUPPRESS)
    ap.add_argument("--repo-extras", help=argparse.SUPPRESS)
    ap.add_argument("--image", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.in_netns:
        a.env = example_env(os.path.join(os.path.dirname(a.repo_main), "netns"))  # the parent removes it
        res, fails, bad = run_group(a, "fixed", a.only, {"main": a.repo_main, "extras": a.repo_extras},
                                    a.image, fixed=True)
        print(json.dumps({"results": res, "load_failures": fails, "problems": bad}))
        return 0

    if a.probe and a.expect:
        print("--probe changes the models: its table is no regression guard (drop --expect)")
        return 2
    if not os.path.isdir(a.examples):
        p = subprocess.run(["bash", os.path.join(HERE, "fetch_examples.sh")])
        if p.returncode != 0:
            return SKIP_EXIT if p.returncode == SKIP_EXIT else p.returncode
    if not os.access(a.inferd, os.X_OK):
        print("inferd not found: %s (set INFERD_BIN)" % a.inferd)
        return 2

    names = sorted(f for f in os.listdir(a.examples) if f.endswith(".py"))
    if a.only:
        names = [n for n in names if n in a.only or n[:-3] in a.only]
    work = tempfile.mkdtemp(prefix="inferd-triton-examples-")
    try:
        repos = {"main": os.path.join(work, "model_repository"), "extras": os.path.join(work, "extras")}
        gen = os.path.join(HERE, "gen_repo.py")
        subprocess.run([sys.executable, gen, repos["main"]] + (["--probe"] if a.probe else []), check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, gen, "--extras", repos["extras"]], check=True, stdout=subprocess.DEVNULL)
        # the repository without simple_identity: Triton's as simple_http_model_control.py counts it (7)
        repos["main7"] = os.path.join(work, "model_repository_7")
        shutil.copytree(repos["main"], repos["main7"], ignore=lambda d, f: ["simple_identity"] if d == repos["main"] else [])
        image = os.path.join(work, "gradient.jpg")
        draw_image(image)
        a.env = example_env(work)

        results, load_failures, problems = [], {}, {}
        for group in ("main", "control", "control7", "extras", "fixed"):
            members = [n for n in names if SERVER_OF.get(n, "main") == group]
            if not members:
                continue
            if group == "fixed":
                res, fails, bad = run_fixed(a, members, repos, image)
            else:
                res, fails, bad = run_group(a, group, members, repos, image)
            results += res
            load_failures[group] = fails
            if bad:
                problems[group] = bad
    finally:
        shutil.rmtree(work, ignore_errors=True)

    results.sort(key=lambda r: r["example"])
    width = max(len(r["example"]) for r in results) if results else 10
    for group, fails in load_failures.items():
        for f in fails:
            print("[%s server] %s" % (group, f))
    print("%-*s  %-4s  %s" % (width, "example", "", "first error line"))
    for r in results:
        why = r["why"] if len(r["why"]) <= 200 else r["why"][:197] + "..."
        print("%-*s  %-4s  %s" % (width, r["example"], r["status"], why))
        if a.verbose and r["status"] == "FAIL":
            print("    | " + "\n    | ".join(r["output"].splitlines()[-30:]))
    for group, bad in problems.items():
        for l in bad:
            print("SERVER PROBLEM [%s server] %s" % (group, l))
    n_pass = sum(r["status"] == "PASS" for r in results)
    print("%d of %d examples pass" % (n_pass, len(results)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "load_failures": load_failures, "problems": problems}, f, indent=1)

    if a.expect:
        want = [l.split("#")[0].strip() for l in open(a.expect)]
        want = [w for w in want if w]
        status = {r["example"]: r["status"] for r in results}
        lost = [w for w in want if status.get(w, "SKIP") == "FAIL"
                or (w in names and w not in status)]
        if lost:
            print("REGRESSION: expected to pass, failed: %s" % " ".join(lost))
        if lost or problems:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
