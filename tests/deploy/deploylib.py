"""Helpers shared by tests/integration/test_deploy_*.py: a tiny identity-model repository written with
the onnx package, free loopback ports, rendering deploy/lb/nginx.conf.template through deploy/lb/render.sh
(the very renderer the deployment uses), and nginx as a non-daemon child process in a temp prefix.

Lives in tests/deploy/ (next to the recorded nvidia-smi outputs) so the test modules share it without
touching the suite's inferd_testlib.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(REPO_ROOT, "deploy")
LB_TEMPLATE = os.path.join(DEPLOY, "lb", "nginx.conf.template")
LB_RENDER = os.path.join(DEPLOY, "lb", "render.sh")
SMI_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smi")

IDENTITY_DIMS = 16  # elements per row; the batch dim (max_batch_size 8) comes first


def write_identity_repo(root, name="identity", dims=IDENTITY_DIMS, max_batch_size=8, instances=1, kind="KIND_CPU"):
    """root/<name>/config.pbtxt + root/<name>/1/model.onnx: OUTPUT0 = Identity(INPUT0), FP32 [-1, dims],
    `instances` instances of `kind` (None: no instance_group, i.e. KIND_AUTO), dynamic batching. Returns root."""
    import onnx
    from onnx import TensorProto, helper

    mdir = os.path.join(root, name, "1")
    os.makedirs(mdir, exist_ok=True)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], name,
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N", dims])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N", dims])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="inferd-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(mdir, "model.onnx"))
    with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
        f.write('name: "%s"\nbackend: "onnxruntime"\nmax_batch_size: %d\n'
                'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ %d ] } ]\n'
                'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ %d ] } ]\n'
                'dynamic_batching { max_queue_delay_microseconds: 200 }\n' % (name, max_batch_size, dims, dims))
        if kind:
            f.write('instance_group [ { count: %d kind: %s } ]\n' % (instances, kind))
    return root


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_bin():
    for p in (os.environ.get("NGINX_BIN"), shutil.which("nginx"), "/usr/sbin/nginx"):
        if p and os.access(p, os.X_OK):
            return p
    return None


def render_lb(out_path, grpc_servers, http_servers, listen_grpc, listen_http, run_dir, listen_addr="127.0.0.1",
              extra=()):
    """Runs deploy/lb/render.sh; returns the rendered text."""
    args = ["sh", LB_RENDER, "--template", LB_TEMPLATE, "--listen-grpc", str(listen_grpc),
            "--listen-http", str(listen_http), "--listen-addr", listen_addr, "--run-dir", run_dir,
            "--out", out_path]
    for g in grpc_servers:
        args += ["--grpc", g]
    for h in http_servers:
        args += ["--http", h]
    args += list(extra)
    r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, "render.sh failed (%d): %s" % (r.returncode, r.stderr)
    with open(out_path) as f:
        return f.read()


def nginx_test_config(conf, prefix):
    """`nginx -t` on the rendered file; returns (rc, output)."""
    r = subprocess.run([nginx_bin(), "-t", "-p", prefix, "-e", os.path.join(prefix, "error.log"), "-c", conf],
                       capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


class NginxProcess:
    """nginx in the foreground (daemon off) as a child of the test: pid, logs and temp files in prefix."""

    def __init__(self, conf, prefix):
        self.conf, self.prefix = conf, prefix
        self.proc = None

    def start(self, port, timeout=20):
        self.log = open(os.path.join(self.prefix, "nginx.stderr"), "w")
        self.proc = subprocess.Popen([nginx_bin(), "-p", self.prefix, "-e", os.path.join(self.prefix, "error.log"),
                                      "-c", self.conf, "-g", "daemon off;"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("nginx exited with %s:\n%s" % (self.proc.returncode, self.logs()))
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not listen on %d within %ds:\n%s" % (port, timeout, self.logs()))

    def logs(self):
        out = []
        for name in ("nginx.stderr", "error.log"):
            p = os.path.join(self.prefix, name)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out.append("--- %s\n%s" % (name, f.read()[-4000:]))
        return "\n".join(out)

    def reload(self):
        self.proc.send_signal(signal.SIGHUP)

    def stop(self, timeout=20):
        """SIGQUIT: nginx's graceful shutdown (workers finish their requests). Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return "timeout"
        self.log.close()
        return self.proc.returncode
