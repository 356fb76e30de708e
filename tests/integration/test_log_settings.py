"""Triton's logging extension (LogSettings) through tritonclient: the settings read back as set, the levels
really change what the server writes (debug lines appear and stop, info lines stop), ISO8601 lines, and
every bad setting is INVALID_ARGUMENT with nothing applied."""

import re

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

import inferd_testlib as lib


def _bad_request(c):
    """A request the server rejects; it logs the rejection at debug level."""
    x = grpcclient.InferInput("INPUT0", [1, 3], "FP32")
    x.set_data_from_numpy(np.zeros((1, 3), np.float32))
    with pytest.raises(InferenceServerException):
        c.infer("mlp", [x])


def _rejections(srv):
    return sum("ModelInfer rejected" in line for line in srv.stderr_text().splitlines())


def _await_rejections(srv, n):
    """The n-th rejection line, once the reader thread has it; then exactly n."""
    srv.await_stderr(lambda lines: sum("ModelInfer rejected" in ln for ln in lines) >= n)
    assert _rejections(srv) == n


INFO_LINE = re.compile(r"^(I\d{4} |\d{4}-\d\d-\d\dT\S+ I )")


def test_log_settings_change_what_is_written(start_server):
    srv = start_server()
    with grpcclient.InferenceServerClient(url=srv.grpc_url) as c:
        s = c.get_log_settings(as_json=True)["settings"]
        assert s["log_info"]["bool_param"] and s["log_warning"]["bool_param"] and s["log_error"]["bool_param"]
        assert s["log_verbose_level"].get("uint32_param", 0) == 0
        assert s["log_format"]["string_param"] == "default"
        _bad_request(c)
        assert _rejections(srv) == 0  # debug is off

        s = c.update_log_settings({"log_verbose_level": 1}, as_json=True)["settings"]
        assert s["log_verbose_level"]["uint32_param"] == 1
        _bad_request(c)
        _await_rejections(srv, 1)
        c.update_log_settings({"log_verbose_level": 0, "log_format": "ISO8601"})
        _bad_request(c)
        # an info line (the settings change itself) in ISO8601
        iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I inferd\] log settings changed")
        srv.await_stderr(lambda lines: any(iso.search(ln) for ln in lines))
        assert _rejections(srv) == 1  # debug off again: the second bad request wrote nothing
        # info off: the next change writes no info line. The rejections (debug on again) mark where
        # the server's output is up to, so no line still in the pipe can pass for a missing one.
        c.update_log_settings({"log_info": False, "log_verbose_level": 1})
        _bad_request(c)
        _await_rejections(srv, 2)
        n = len(srv.stderr_text().splitlines())
        c.update_log_settings({"log_info": False, "log_format": "default"})
        _bad_request(c)
        _await_rejections(srv, 3)
        after = srv.stderr_text().splitlines()[n:]
        assert not [ln for ln in after if INFO_LINE.search(ln)], after
        s = c.get_log_settings(as_json=True)["settings"]
        assert not s["log_info"].get("bool_param", False) and s["log_format"]["string_param"] == "default"

        for bad, words in [({"log_format": "json"}, "ISO8601"), ({"log_file": "/tmp/x.log"}, "stderr"),
                           ({"no_such": True}, "unknown log setting"),
                           ({"log_info": True, "log_format": "json"}, "ISO8601")]:
            with pytest.raises(InferenceServerException) as ei:
                c.update_log_settings(bad)
            assert lib.status_name(ei.value) == "INVALID_ARGUMENT" and words in lib.error_message(ei.value), bad
        # wrong value types: tritonclient picks the type from the key, so these go out by hand
        from tritonclient.grpc import service_pb2
        for key, field, value, words in [("log_verbose_level", "bool_param", True, "uint32"),
                                         ("log_info", "uint32_param", 1, "bool"),
                                         ("log_format", "bool_param", True, "string")]:
            req = service_pb2.LogSettingsRequest()
            setattr(req.settings[key], field, value)
            with pytest.raises(grpc.RpcError) as ei:
                c._client_stub.LogSettings(req, timeout=10)
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in ei.value.details(), key
        # the last refusal applied nothing: log_info is still off
        assert not c.get_log_settings(as_json=True)["settings"]["log_info"].get("bool_param", False)
    srv.stop()
    srv.assert_clean_exit()
