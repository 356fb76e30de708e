"""tests/gpu/llm_grpc_wire.py: one generative request over gRPC ModelStreamInfer with grpcio alone, its
protobuf messages written and read by hand (the few fields Triton's TensorRT-LLM tensors need), so a GPU
machine without tritonclient (or with a protobuf older than tritonclient's) can still stream and cancel.
Used by tests/gpu/llm_storm.py. grpcio is imported by GrpcGen, not at import: `have_grpc()` says whether
it is there.

The messages (proto/grpc_service.proto): ModelInferRequest {1 model_name, 3 id, 5 inputs (1 name,
2 datatype, 3 shape), 7 raw_input_contents}; ModelStreamInferResponse {1 error_message, 2 infer_response:
ModelInferResponse {3 id, 4 parameters (map: 1 key, 2 InferParameter {1 bool_param}), 5 outputs (1 name,
2 datatype, 3 shape), 6 raw_output_contents}}.
"""
import struct
import threading

METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"


def have_grpc():
    try:
        import grpc  # noqa: F401
        return True
    except ImportError:
        return False


# --- writing

def _varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, wire, payload):
    return _varint((num << 3) | wire) + payload


def _bytes_field(num, data):
    if isinstance(data, str):
        data = data.encode()
    return _field(num, 2, _varint(len(data)) + data)


def _tensor(name, datatype, shape):
    packed = b"".join(_varint(d) for d in shape)
    return _bytes_field(1, name) + _bytes_field(2, datatype) + _bytes_field(3, packed)


def infer_request(model, rid, ids, out_len, streaming=True, end_id=None):
    """A ModelInferRequest with input_ids [len], input_lengths [1], request_output_len [1], streaming [1]
    (and end_id when given), as raw little-endian contents."""
    ins = [("input_ids", "INT32", [len(ids)], struct.pack("<%di" % len(ids), *ids)),
           ("input_lengths", "INT32", [1], struct.pack("<i", len(ids))),
           ("request_output_len", "INT32", [1], struct.pack("<i", out_len)),
           ("streaming", "BOOL", [1], b"\x01" if streaming else b"\x00")]
    if end_id is not None:
        ins.append(("end_id", "INT32", [1], struct.pack("<i", end_id)))
    msg = _bytes_field(1, model) + _bytes_field(3, rid)
    for name, dt, shape, _ in ins:
        msg += _bytes_field(5, _tensor(name, dt, shape))
    for *_, raw in ins:
        msg += _bytes_field(7, raw)
    return msg


# --- reading

def _read_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7


def fields(b):
    """The (number, value) pairs of a message: ints for varints, bytes for length-delimited fields."""
    i, out = 0, []
    while i < len(b):
        key, i = _read_varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _read_varint(b, i)
        elif wire == 2:
            n, i = _read_varint(b, i)
            v, i = bytes(b[i:i + n]), i + n
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("protobuf wire type %d" % wire)
        out.append((num, v))
    return out


def stream_response(b):
    """A ModelStreamInferResponse -> dict(error, id, final, tokens)."""
    r = {"error": "", "id": "", "final": False, "tokens": []}
    infer = b""
    for num, v in fields(b):
        if num == 1:
            r["error"] = v.decode(errors="replace")
        elif num == 2:
            infer = v
    names, raws = [], []
    for num, v in fields(infer):
        if num == 3:
            r["id"] = v.decode(errors="replace")
        elif num == 4:
            kv = dict(fields(v))
            if kv.get(1) == b"triton_final_response":
                r["final"] = bool(dict(fields(kv.get(2, b""))).get(1, 0))
        elif num == 5:
            names.append(dict(fields(v)).get(1, b"").decode())
        elif num == 6:
            raws.append(v)
    for name, raw in zip(names, raws):
        if name == "output_ids":
            r["tokens"] = list(struct.unpack("<%di" % (len(raw) // 4), raw))
    return r


# --- one request on its own stream

class GrpcGen:
    """A channel to target; stream(...) sends one request on a new ModelStreamInfer stream and reads its
    responses; the stream can be cancelled from the callback (return True) at any response."""

    def __init__(self, target):
        import grpc
        self.grpc = grpc
        self.ch = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 64 << 20)])
        self.call = self.ch.stream_stream(METHOD)  # no (de)serializers: bytes in, bytes out

    def close(self):
        self.ch.close()

    def stream(self, model, rid, ids, out_len, on_tokens=None, timeout=600, cancel_at_once=False):
        """Returns dict(tokens, final, error, cancelled). on_tokens(tokens so far) -> True cancels the stream
        there; cancel_at_once cancels right after the request is sent (before any answer). The request
        side stays open until the final response, so the server never sees a half-closed stream early."""
        done = threading.Event()
        req = infer_request(model, rid, ids, out_len)

        def requests():
            yield req
            done.wait(timeout)

        res = {"tokens": [], "final": False, "error": None, "cancelled": False}
        it = self.call(requests(), timeout=timeout)
        try:
            if cancel_at_once:
                res["cancelled"] = True
                it.cancel()
                return res
            for raw in it:
                r = stream_response(raw)
                if r["error"]:
                    res["error"] = r["error"]
                    break
                res["tokens"] += r["tokens"]
                if r["final"]:
                    res["final"] = True
                    break
                if on_tokens and on_tokens(res["tokens"]):
                    res["cancelled"] = True
                    it.cancel()
                    break
        except self.grpc.RpcError as e:
            if not res["cancelled"]:
                res["error"] = "%s: %s" % (e.code(), e.details())
        finally:
            done.set()
        return res
