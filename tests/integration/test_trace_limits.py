"""The trace file is capped (--trace-file-max-bytes): any client may set trace_rate 1 and trace_count -1
through the trace settings API (Triton's, open to every client), and then every request writes ~2 KB to
--trace-file (~9 GB an hour at 1,000 req/s). Past the cap tracing stops, one log line says so, the file
stays valid JSON within the cap, and a client turning tracing on again writes nothing more."""

import json
import os

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

import inferd_testlib as lib

CAP = 16384


def _infer(c, n):
    x = grpcclient.InferInput("INPUT0", [1, 1024], "FP32")
    x.set_data_from_numpy(np.ones((1, 1024), np.float32))
    for i in range(n):
        c.infer("mlp", [x], request_id="req-%d-%s" % (i, "x" * 200))


def test_trace_file_stops_at_its_cap(start_server, tmp_path):
    path = tmp_path / "trace.json"
    srv = start_server(["--trace-file", str(path), "--trace-rate", "1000", "--trace-file-max-bytes", str(CAP)])
    line = "reached --trace-file-max-bytes (%d bytes)" % CAP
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        c.update_trace_settings(settings={"trace_rate": "1", "trace_count": "-1"})
        _infer(c, 60)  # ~2 KB each: far past 16 KiB
        srv.await_stderr(lambda ls: any(line in l for l in ls))
        st = c.get_trace_settings(as_json=True)["settings"]
        assert st["trace_level"]["value"] == ["OFF"], st  # stopped, and says so
        # turned on again: still nothing written, and no second line
        c.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "1"})
        _infer(c, 20)
        c.get_server_metadata()  # a round trip after the last traced request
    assert srv.stop() == 0
    srv.assert_clean_exit()
    assert sum(line in l for l in srv.lines) == 1, [l for l in srv.lines if "trace" in l]
    size = os.path.getsize(path)
    assert 0 < size <= CAP, size
    with open(path) as f:
        events = json.load(f)  # the closing bracket fitted in the reserve
    spans = [e for e in events if e.get("ph") == "X"]
    assert spans and len(spans) < 60, len(spans)


def test_trace_file_max_bytes_validated(repo_dir):
    err = lib.start_fails(repo_dir, ["--trace-file", "/tmp/x.json", "--trace-file-max-bytes", "-5"])
    assert "--trace-file-max-bytes" in err, err
