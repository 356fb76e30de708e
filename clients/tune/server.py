"""inferd-tune's side of the server: start inferd in explicit model-control mode on free ports (or use
one already running), load a model with a config override (Triton's HTTP repository API, so Triton
serves too), read its config, and scrape /metrics. Standard library only."""

import json
import os
import re
import signal
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request

READY_RE = re.compile(r"inferd ready: grpc=(\d+) http=(\d+)")
_METRIC_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)')
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class ServerError(Exception):
    pass


def parse_metrics(text):
    """Prometheus text -> list of (name, {label: value}, float); comments and odd lines skipped."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _METRIC_RE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        out.append((m.group(1), dict(_LABEL_RE.findall(m.group(2) or "")), v))
    return out


class Server:
    """A server inferd-tune talks to. With `binary` it starts one (and owns it); with `grpc_url` and
    `http_url` it uses one already running (which must be in explicit model-control mode)."""

    def __init__(self, repo=None, binary=None, extra_args=(), log_path=None, grpc_url=None, http_url=None,
                 metrics_url=None, start_timeout_s=120.0):
        self.repo, self.binary, self.extra_args = repo, binary, list(extra_args)
        self.log_path, self.start_timeout_s = log_path, start_timeout_s
        self.grpc_url, self.http_url, self.metrics_url = grpc_url, http_url, metrics_url
        self.proc = self._reader = None
        self._ready = threading.Event()
        self._tail = []

    # -- process

    def start(self):
        if self.grpc_url:
            self.metrics_url = self.metrics_url or self.http_url + "/metrics"
            return self
        if not self.binary or not os.access(self.binary, os.X_OK):
            raise ServerError("inferd binary not found or not executable: %r (give --inferd)" % self.binary)
        args = [self.binary, "--model-repository", self.repo, "--model-control-mode", "explicit",
                "--grpc-port", "0", "--http-port", "0", "--strict-readiness", "false"] + self.extra_args
        log = open(self.log_path, "w") if self.log_path else None
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace")

        def read():
            for line in self.proc.stderr:
                if log:
                    log.write(line)
                    log.flush()
                self._tail = (self._tail + [line.rstrip("\n")])[-40:]
                m = READY_RE.search(line)
                if m and not self._ready.is_set():
                    self.grpc_url = "127.0.0.1:%s" % m.group(1)   # an address: no DNS lookup (gRPC c-ares)
                    self.http_url = "http://127.0.0.1:%s" % m.group(2)
                    self._ready.set()
            self._ready.set()
            if log:
                log.close()
        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not self._ready.wait(self.start_timeout_s) or not self.grpc_url:
            self.stop()
            raise ServerError("inferd did not become ready within %gs (exit code %s); its last lines:\n%s" % (
                self.start_timeout_s, self.proc.poll(), "\n".join(self._tail)))
        self.metrics_url = self.metrics_url or self.http_url + "/metrics"
        return self

    def stop(self, timeout=60):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(10)   # its last lines into server.log
        return self.proc.returncode

    def alive(self):
        return self.proc is None or self.proc.poll() is None

    def tail(self):
        return "\n".join(self._tail)

    # -- HTTP

    def _call(self, method, url, body=None, timeout=600):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError) as e:
            raise ServerError("%s %s: %s" % (method, url, e))

    @staticmethod
    def _error_text(text):
        try:
            return json.loads(text).get("error", text)
        except (ValueError, AttributeError):
            return text

    def load(self, model, config_json=None):
        """Loads (or reloads) model, with config_json (a JSON string) replacing its config.pbtxt; returns
        None on success, else the server's reason."""
        body = {"parameters": {"config": config_json}} if config_json is not None else {}
        status, text = self._call("POST", "%s/v2/repository/models/%s/load" % (
            self.http_url, urllib.parse.quote(model, safe="")), body)
        return None if status == 200 else "load failed (HTTP %d): %s" % (status, self._error_text(text))

    def unload(self, model):
        self._call("POST", "%s/v2/repository/models/%s/unload" % (self.http_url, urllib.parse.quote(model, safe="")),
                   {})

    def model_config(self, model):
        status, text = self._call("GET", "%s/v2/models/%s/config" % (self.http_url, urllib.parse.quote(model, safe="")))
        if status != 200:
            raise ServerError("config of %s: HTTP %d: %s" % (model, status, self._error_text(text)))
        return json.loads(text)

    def metrics(self):
        """The parsed /metrics, or [] where the server has none."""
        try:
            status, text = self._call("GET", self.metrics_url, timeout=30)
        except ServerError:
            return []
        return parse_metrics(text) if status == 200 else []
