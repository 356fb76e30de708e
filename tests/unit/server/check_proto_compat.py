#!/usr/bin/env python3
"""Wire-compatibility check of inferd's protos against Triton's.

Compiles proto/grpc_service.proto and proto/model_config.proto into a
descriptor set with protoc and compares every message, field (name, number,
type, label, type name, oneof membership), enum value and RPC present in our
files with the ones in tritonclient's generated modules. Anything of ours that
differs from Triton's is an error; things Triton has that we left out are
listed as notes only (a subset is allowed).

Run: /tmp/venv/bin/python tests/unit/server/check_proto_compat.py [repo_root]
Exit status 0 when compatible.
"""
import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2

try:
    from tritonclient.grpc import model_config_pb2, service_pb2
except ImportError as exc:  # pragma: no cover
    print(f"tritonclient not importable: {exc}")
    sys.exit(2)


def load_ours(root):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        subprocess.run(
            ["protoc", f"--descriptor_set_out={out}", "--include_imports",
             f"-I{os.path.join(root, 'proto')}", "grpc_service.proto"],
            check=True)
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    return {fd.name: fd for fd in fds.file}


def to_proto(module):
    fd = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(fd)
    return fd


def index(fd):
    """Flattens a file into {full name: descriptor} for messages, enums, services."""
    msgs, enums, svcs = {}, {}, {}
    pkg = "." + fd.package if fd.package else ""

    def walk(prefix, m):
        name = f"{prefix}.{m.name}"
        msgs[name] = m
        for e in m.enum_type:
            enums[f"{name}.{e.name}"] = e
        for n in m.nested_type:
            walk(name, n)

    for m in fd.message_type:
        walk(pkg, m)
    for e in fd.enum_type:
        enums[f"{pkg}.{e.name}"] = e
    for s in fd.service:
        svcs[f"{pkg}.{s.name}"] = s
    return msgs, enums, svcs


def field_sig(m, f):
    oneof = m.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
    return (f.number, f.type, f.label, f.type_name, oneof, f.proto3_optional)


def compare(ours, theirs, errors, notes):
    om, oe, os_ = index(ours)
    tm, te, ts = index(theirs)
    for name, m in om.items():
        t = tm.get(name)
        if t is None:
            errors.append(f"message {name}: not in Triton's {theirs.name}")
            continue
        tf = {f.name: f for f in t.field}
        of = {f.name: f for f in m.field}
        for fname, f in of.items():
            if fname not in tf:
                errors.append(f"{name}.{fname}: not in Triton")
                continue
            a, b = field_sig(m, f), field_sig(t, tf[fname])
            if a != b:
                errors.append(f"{name}.{fname}: ours {a} != Triton {b}")
        for fname in tf:
            if fname not in of:
                notes.append(f"{name}.{fname}: Triton field left out")
        if m.options.map_entry != t.options.map_entry:
            errors.append(f"{name}: map_entry differs")
    for name in tm:
        if name not in om:
            notes.append(f"message {name}: Triton message left out")
    for name, e in oe.items():
        t = te.get(name)
        if t is None:
            errors.append(f"enum {name}: not in Triton")
            continue
        ov = {v.name: v.number for v in e.value}
        tv = {v.name: v.number for v in t.value}
        if ov != tv:
            errors.append(f"enum {name}: ours {ov} != Triton {tv}")
    for name, s in os_.items():
        t = ts.get(name)
        if t is None:
            errors.append(f"service {name}: not in Triton")
            continue
        tmeth = {x.name: x for x in t.method}
        for x in s.method:
            y = tmeth.get(x.name)
            if y is None:
                errors.append(f"rpc {name}/{x.name}: not in Triton")
                continue
            a = (x.input_type, x.output_type, x.client_streaming, x.server_streaming)
            b = (y.input_type, y.output_type, y.client_streaming, y.server_streaming)
            if a != b:
                errors.append(f"rpc {name}/{x.name}: ours {a} != Triton {b}")
        mine = {x.name for x in s.method}
        for x in t.method:
            if x.name not in mine:
                notes.append(f"rpc {name}/{x.name}: Triton RPC left out")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    ours = load_ours(root)
    errors, notes = [], []
    pairs = [("model_config.proto", to_proto(model_config_pb2)),
             ("grpc_service.proto", to_proto(service_pb2))]
    for fname, theirs in pairs:
        if fname not in ours:
            errors.append(f"{fname}: missing from our descriptor set")
            continue
        if ours[fname].package != theirs.package:
            errors.append(f"{fname}: package {ours[fname].package} != {theirs.package}")
        compare(ours[fname], theirs, errors, notes)
    for n in notes:
        print("note:", n)
    for e in errors:
        print("ERROR:", e)
    nmsg = sum(len(index(ours[f])[0]) for f, _ in pairs if f in ours)
    print(f"{nmsg} messages compared, {len(errors)} errors, {len(notes)} notes")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
