"""inferd-tune's real bench: load a configuration into the server (a model-control load with the
config as a JSON override: no restart), warm it, and measure one load level with inferd-load, with
the server's /metrics read before and after (batch-size histogram, queue and compute time, GPU busy
and utilisation, GPU memory). It is the `bench` search.Search drives."""

import json
import os
import subprocess
import tempfile
import time

from . import modelcfg


def _labels_match(labels, model, version):
    return labels.get("model") == model and (version is None or labels.get("version") == version)


def metric_sum(samples, name, model=None, version=None):
    return sum(v for n, l, v in samples if n == name and (model is None or _labels_match(l, model, version)))


def metric_max(samples, name):
    vals = [v for n, _, v in samples if n == name]
    return max(vals) if vals else None


def batch_hist_delta(before, after, model):
    """inferd_batch_size's buckets over the window as [(upper bound, executions)], zero buckets left out;
    None where the server has no such histogram (Triton)."""
    def cum(samples):
        out = {}
        for n, l, v in samples:
            if n == "inferd_batch_size_bucket" and l.get("model") == model:
                out[l.get("le")] = out.get(l.get("le"), 0.0) + v
        return out
    a, b = cum(after), cum(before)
    if not a:
        return None
    keys = sorted((k for k in a if k != "+Inf"), key=float) + (["+Inf"] if "+Inf" in a else [])
    out, prev = [], 0.0
    for k in keys:
        c = a[k] - b.get(k, 0.0)
        n = c - prev
        prev = c
        if n > 0.5:
            out.append((k, int(round(n))))
    return out


def hist_text(h):
    return "" if not h else ";".join("%s:%d" % (k, n) for k, n in h)


class LoadError(Exception):
    pass


class Bench:
    """server: a started tune.server.Server; load_bin: inferd-load; mode: 'concurrency' or 'rate'."""

    def __init__(self, server, model, base, load_bin, duration_s=2.0, warmup_s=1.0, mode="concurrency",
                 gpu_memory_gib=None, threads=None, load_args=(), log=None, workdir=None):
        self.server, self.model, self.base = server, model, base
        self.load_bin, self.duration_s, self.warmup_s, self.mode = load_bin, duration_s, warmup_s, mode
        self.gpu_memory_gib, self.threads, self.load_args = gpu_memory_gib, threads, list(load_args)
        self.log = log or (lambda s: None)
        self.workdir = workdir or tempfile.mkdtemp(prefix="inferd-tune-")
        self.loaded = None
        self.prepare_s = {}
        self.levels_hint = None
        self._said_no_mem = False

    # -- configuration

    def prepare(self, cfg):
        t = time.monotonic()
        m = modelcfg.apply(self.base, cfg)
        why = self.server.load(self.model, modelcfg.to_json(m))
        if why:
            self.loaded = None
            if not self.server.alive():
                raise LoadError("the server exited while loading %s:\n%s" % (cfg.label(), self.server.tail()))
            return why
        self.loaded = cfg
        if self.gpu_memory_gib and cfg.kind == "gpu":
            used = metric_max(self.server.metrics(), "nv_gpu_memory_used_bytes")
            if used is None and not self._said_no_mem:
                self._said_no_mem = True
                self.log("--gpu-memory-gib cannot be checked: the server exports no nv_gpu_memory_used_bytes "
                         "(no NVML, or a MIG slice)")
            if used is not None and used > self.gpu_memory_gib * 2**30:
                return "GPU memory %.2f GiB over the bound of %g GiB" % (used / 2**30, self.gpu_memory_gib)
        if self.warmup_s > 0:
            level = self.levels_hint or 1
            self._run_load(level, self.warmup_s, "warmup")
        self.prepare_s[cfg] = time.monotonic() - t
        return None

    # -- one level

    def _run_load(self, level, duration_s, tag):
        out = os.path.join(self.workdir, "%s.json" % tag)
        args = [self.load_bin, "-u", self.server.grpc_url, "-m", self.model, "--duration-s", "%g" % duration_s,
                "--server-stats", "--json", out]
        if self.mode == "rate":
            args += ["--request-rate-range", "%g" % level]
        else:
            args += ["--concurrency-range", "%d" % level]
        if self.threads:
            args += ["--threads", str(self.threads)]
        args += self.load_args
        try:
            p = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=duration_s + 120)
        except subprocess.TimeoutExpired:
            raise LoadError("inferd-load did not finish: %s" % " ".join(args))
        if p.returncode != 0:
            raise LoadError("inferd-load exited %d: %s\n%s" % (p.returncode, " ".join(args), p.stderr[-2000:]))
        with open(out) as f:
            rows = json.load(f)
        if not rows:
            raise LoadError("inferd-load wrote no result: %s" % " ".join(args))
        return rows[0]

    def measure(self, cfg, level):
        if self.loaded != cfg:
            why = self.prepare(cfg)
            if why:
                raise LoadError("%s no longer loads: %s" % (cfg.label(), why))
        before = self.server.metrics()
        t0 = time.monotonic()
        r = self._run_load(level, self.duration_s, "level")
        wall = time.monotonic() - t0
        after = self.server.metrics()
        m = self.model
        busy = metric_sum(after, "inferd_gpu_busy_seconds_total") - metric_sum(before, "inferd_gpu_busy_seconds_total")
        util = metric_max(after, "nv_gpu_utilization")
        mem = metric_max(after, "nv_gpu_memory_used_bytes")
        hist = batch_hist_delta(before, after, m)
        ex = metric_sum(after, "nv_inference_exec_count", m) - metric_sum(before, "nv_inference_exec_count", m)
        cnt = metric_sum(after, "nv_inference_count", m) - metric_sum(before, "nv_inference_count", m)
        us = lambda k: None if r.get(k) is None else r[k] / 1000.0  # noqa: E731
        return {
            "level": level,
            "throughput_rps": r["throughput_rps"],
            "rows_per_s": r.get("rows_per_s"),
            "avg_ms": us("avg_us"),
            "p50_ms": us("p50_us"),
            "p90_ms": us("p90_us"),
            "p99_ms": us("p99_us"),
            "errors": int(r.get("errors") or 0),
            "requests": r.get("requests"),
            "queue_ms": us("server_queue_us"),
            "compute_infer_ms": us("server_compute_infer_us"),
            "avg_batch": r.get("server_avg_batch") or (cnt / ex if ex > 0 else None),
            "batch_hist": hist_text(hist),
            "gpu_busy": (busy / wall) if wall > 0 and any(n == "inferd_gpu_busy_seconds_total" for n, _, _ in after)
            else None,
            "gpu_util": util,
            "gpu_mem_mib": None if mem is None else mem / 2**20,
            "duration_s": r.get("duration_s"),
        }
