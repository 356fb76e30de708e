"""inferd-tune's reading of /metrics (clients/tune/server.py, bench.py) on Prometheus text written here:
the batch-size histogram's change over a window as executions per bucket, sums by model, and lines it
cannot read skipped rather than fatal."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients"))
from tune.bench import batch_hist_delta, hist_text, metric_max, metric_sum  # noqa: E402
from tune.server import parse_metrics  # noqa: E402


def _hist(model, cum):
    lines = ['inferd_batch_size_bucket{model="%s",version="1",le="%s"} %d' % (model, le, n) for le, n in cum]
    return "\n".join(lines)


BEFORE = "\n".join([
    "# HELP inferd_batch_size rows per execution",
    _hist("mlp", [("1", 10), ("2", 10), ("4", 12), ("8", 12), ("+Inf", 12)]),
    _hist("other", [("1", 5), ("+Inf", 5)]),
    'nv_inference_exec_count{model="mlp",version="1"} 12',
    'nv_gpu_memory_used_bytes{gpu_uuid="GPU-a"} 1000',
    'nv_gpu_memory_used_bytes{gpu_uuid="GPU-b"} 3000',
    "this line is not a metric",
    'bad_value{model="mlp"} NaNx',
])
AFTER = "\n".join([
    _hist("mlp", [("1", 15), ("2", 25), ("4", 40), ("8", 47), ("+Inf", 47)]),
    _hist("other", [("1", 9), ("+Inf", 9)]),
    'nv_inference_exec_count{model="mlp",version="1"} 47',
])


def test_batch_hist_delta_per_bucket():
    b, a = parse_metrics(BEFORE), parse_metrics(AFTER)
    # cumulative deltas 5, 15, 28, 35 -> per bucket 5, 10, 13, 7; the other model's buckets stay out
    assert batch_hist_delta(b, a, "mlp") == [("1", 5), ("2", 10), ("4", 13), ("8", 7)]
    assert hist_text(batch_hist_delta(b, a, "mlp")) == "1:5;2:10;4:13;8:7"
    assert batch_hist_delta(b, a, "other") == [("1", 4)]
    assert batch_hist_delta(b, a, "absent") is None   # a server without the histogram (Triton)


def test_sums_and_unreadable_lines():
    b, a = parse_metrics(BEFORE), parse_metrics(AFTER)
    assert metric_sum(a, "nv_inference_exec_count", "mlp") - metric_sum(b, "nv_inference_exec_count", "mlp") == 35
    assert metric_max(b, "nv_gpu_memory_used_bytes") == 3000 and metric_max(a, "nv_gpu_memory_used_bytes") is None
    assert not [n for n, _, _ in b if n in ("this", "bad_value")]
