"""A tuned configuration written into a model's config: Triton's ModelConfig protobuf (the message
tritonclient ships, which inferd's proto/model_config.proto matches), read from the repository's
config.pbtxt or the server's JSON, changed in the tuned fields only, written back as config.pbtxt
text and as the JSON a model-control load takes as its override (Triton's and inferd's)."""

import os

try:
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2 as mc
except ImportError as e:  # pragma: no cover - a clear message instead of a trace
    raise SystemExit("inferd-tune needs tritonclient's protos (pip install 'tritonclient[grpc]'): %s" % e)

KIND = {"cpu": mc.ModelInstanceGroup.KIND_CPU, "gpu": mc.ModelInstanceGroup.KIND_GPU}


def read_base(repo, model, server_json=None):
    """The model's config as a ModelConfig: the repository's config.pbtxt when there is one, else the
    config the server completed (`server_json`, GET /v2/models/<m>/config)."""
    path = os.path.join(repo, model, "config.pbtxt") if repo else None
    m = mc.ModelConfig()
    if path and os.path.exists(path):
        with open(path) as f:
            text_format.Parse(f.read(), m)
    elif server_json is not None:
        json_format.ParseDict(server_json, m, ignore_unknown_fields=True)
    else:
        raise ValueError("no config.pbtxt for %s and no server config to start from" % model)
    if not m.name:
        m.name = model
    return m


def apply(base, cfg):
    """A copy of base with cfg's kind, precision, instances, max batch size, queue delay and preferred
    sizes. Fields the tuner does not choose stay as they were."""
    m = mc.ModelConfig()
    m.CopyFrom(base)
    if cfg.max_batch_size > 0 or base.max_batch_size > 0:
        m.max_batch_size = cfg.max_batch_size
        if cfg.max_batch_size > 1:
            db = m.dynamic_batching
            db.max_queue_delay_microseconds = cfg.queue_delay_us
            del db.preferred_batch_size[:]
            db.preferred_batch_size.extend(cfg.preferred_sizes())
        else:
            m.ClearField("dynamic_batching")
    gpus = [g for grp in base.instance_group for g in grp.gpus]
    del m.instance_group[:]
    g = m.instance_group.add()
    g.count = cfg.instances
    g.kind = KIND[cfg.kind]
    if cfg.kind == "gpu" and gpus:
        g.gpus.extend(sorted(set(gpus)))
    if cfg.kind == "gpu":
        m.parameters["precision"].string_value = cfg.precision
    return m


def to_pbtxt(m):
    return text_format.MessageToString(m)


def to_json(m):
    return json_format.MessageToJson(m, preserving_proto_field_name=True, indent=None)


def parse_pbtxt(text):
    m = mc.ModelConfig()
    text_format.Parse(text, m)
    return m
