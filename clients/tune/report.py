"""inferd-tune's outputs: points.csv (every measured point) and report.html, one self-contained file
(inline SVG drawn here, inline CSS, no script, nothing fetched) that a browser opens from disk: the
throughput-vs-p99 scatter with the Pareto front and the chosen point marked, a table of every point,
and per configuration its levels with queue time, compute time, batch size, GPU busy and its
batch-size histogram."""

import csv
import html
import math

from .search import DIMS

COLUMNS = ["point", "config", "label", "kind", "precision", "max_batch_size", "instances", "queue_delay_us",
           "preferred", "preferred_sizes", "load_mode", "phase", "level", "throughput_rps", "rows_per_s", "avg_ms",
           "p50_ms", "p90_ms", "p99_ms", "errors", "requests", "queue_ms", "compute_infer_ms", "avg_batch",
           "batch_hist", "gpu_busy", "gpu_util", "gpu_mem_mib", "duration_s", "feasible", "pareto", "chosen"]


def rows_of(search, mode, chosen):
    """Every measured point as a flat dict (COLUMNS), in measuring order, with the Pareto front (no other
    point has at least the throughput at no more p99, one of them strictly) and the chosen point marked."""
    rows = []
    for ci, r in enumerate([r for r in search.results.values() if r.points]):
        for k, p in enumerate(r.points):
            row = {d: getattr(r.cfg, d) for d in DIMS}
            row.update({"config": ci + 1, "label": r.cfg.label(), "load_mode": mode,
                        "preferred_sizes": " ".join(str(x) for x in r.cfg.preferred_sizes()),
                        "phase": p.get("phase", "search"), "feasible": int(search.obj.feasible(p)),
                        "chosen": int(chosen is not None and r is chosen and k == r.chosen_index),
                        "chosen_first": chosen is not None and r is chosen and chosen.final is not None
                        and k == r.score[2]})
            for c in COLUMNS:
                if c in p and c not in row:
                    row[c] = p[c]
            rows.append(row)
    for i, a in enumerate(rows):
        a["point"] = i + 1
        # a window where no request completed (p99 reads 0) measured nothing: never on the front
        a["pareto"] = int(a["throughput_rps"] > 0 and not any(
            b["throughput_rps"] >= a["throughput_rps"] and b["p99_ms"] <= a["p99_ms"] and
            (b["throughput_rps"] > a["throughput_rps"] or b["p99_ms"] < a["p99_ms"]) for b in rows
            if b["throughput_rps"] > 0))
    return rows


def _fmt(v):
    if v is None:
        return ""
    if isinstance(v, float):
        if v == 0 or math.isnan(v):
            return "0"
        return "%.4g" % v if abs(v) < 1e4 else "%.0f" % v
    return str(v)


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: _fmt(r.get(c)) for c in COLUMNS})


# --- SVG

def _ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw), default=10 * mag)
    t = math.floor(lo / step) * step
    out = [round(t, 10)]
    while out[-1] < hi - step * 1e-9:     # up to the first tick at or above hi
        t += step
        out.append(round(t, 10))
    return out


def _log_ticks(lo, hi):
    """Decade ticks (1, 2, 5 per decade) spanning [lo, hi] for a log axis."""
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    out = [m * 10 ** e for e in range(e0, e1 + 1) for m in (1, 2, 5)]
    first = max(t for t in out if t <= lo)
    last = min(t for t in out if t >= hi)
    return [t for t in out if first <= t <= last]


def _e(s):
    return html.escape(str(s), quote=True)


def scatter_svg(rows, obj, w=760, h=440):
    """Throughput (y) against p99 (x): one <circle class="pt"> per point, the Pareto front as a line
    through its points, the chosen point ringed, the objective's bound dashed."""
    ml, mr, mt, mb = 70, 20, 20, 50
    xs = [r["p99_ms"] for r in rows] + ([obj.p99_ms] if obj.kind == "throughput" else [])
    ys = [r["throughput_rps"] for r in rows] + ([obj.min_rps] if obj.kind == "latency" else [])
    yt = _ticks(0.0, max(ys) * 1.05)
    y1 = yt[-1]
    lo = min(x for x in xs if x > 0) if any(x > 0 for x in xs) else 1.0
    if max(xs) / lo > 30:   # latencies over more than a decade and a half: a log axis keeps the low ones apart
        xt = _log_ticks(lo, max(xs))
        a, b = math.log10(xt[0]), math.log10(xt[-1])
        X = lambda v: ml + (w - ml - mr) * (math.log10(max(v, xt[0])) - a) / (b - a)  # noqa: E731
        xlabel = "p99 latency (ms, log scale)"
    else:
        xt = _ticks(0.0, max(xs) * 1.05)
        X = lambda v: ml + (w - ml - mr) * v / xt[-1]  # noqa: E731
        xlabel = "p99 latency (ms)"
    Y = lambda v: h - mb - (h - mt - mb) * v / y1  # noqa: E731
    o = ['<svg id="scatter" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
         'role="img" aria-label="throughput against p99 latency">' % (w, h, w, h),
         '<rect x="0" y="0" width="%d" height="%d" fill="#fff"/>' % (w, h)]
    for t in xt:
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>' % (X(t), mt, X(t), h - mb))
        o.append('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>' % (X(t), h - mb + 15, _fmt(t)))
    for t in yt:
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>' % (ml, Y(t), w - mr, Y(t)))
        o.append('<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>' % (ml - 5, Y(t) + 4, _fmt(t)))
    o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (ml, h - mb, w - mr, h - mb))
    o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (ml, mt, ml, h - mb))
    o.append('<text x="%d" y="%d" font-size="12" text-anchor="middle">%s</text>' % ((ml + w - mr) // 2, h - 12, xlabel))
    o.append('<text x="16" y="%d" font-size="12" text-anchor="middle" transform="rotate(-90 16 %d)">'
             'throughput (infer/s)</text>' % ((mt + h - mb) // 2, (mt + h - mb) // 2))
    if obj.kind == "throughput":
        o.append('<line class="target" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c00" stroke-dasharray="5,4"/>'
                 % (X(obj.p99_ms), mt, X(obj.p99_ms), h - mb))
        o.append('<text x="%.1f" y="%d" font-size="11" fill="#c00">p99 target %g ms</text>' % (
            X(obj.p99_ms) + 4, mt + 12, obj.p99_ms))
    else:
        o.append('<line class="target" x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#c00" stroke-dasharray="5,4"/>'
                 % (ml, Y(obj.min_rps), w - mr, Y(obj.min_rps)))
        o.append('<text x="%d" y="%.1f" font-size="11" fill="#c00">min throughput %g/s</text>' % (
            ml + 4, Y(obj.min_rps) - 4, obj.min_rps))
    front = sorted((r for r in rows if r["pareto"]), key=lambda r: r["p99_ms"])
    if front:
        o.append('<polyline class="pareto-front" fill="none" stroke="#e08000" stroke-width="2" points="%s"/>' %
                 " ".join("%.1f,%.1f" % (X(r["p99_ms"]), Y(r["throughput_rps"])) for r in front))
    for r in rows:
        cls = "pt" + (" pareto" if r["pareto"] else "") + (" chosen" if r["chosen"] else "") + (
            "" if r["feasible"] else " infeasible")
        fill = "#1f77b4" if r["feasible"] else "#aaa"
        o.append('<circle class="%s" data-point="%d" cx="%.1f" cy="%.1f" r="%d" fill="%s" stroke="%s">'
                 '<title>#%d %s, level %s: %s infer/s, p99 %s ms</title></circle>' % (
                     cls, r["point"], X(r["p99_ms"]), Y(r["throughput_rps"]), 5 if r["pareto"] else 4, fill,
                     "#e08000" if r["pareto"] else "none", r["point"], _e(r["label"]), _fmt(r["level"]),
                     _fmt(r["throughput_rps"]), _fmt(r["p99_ms"])))
    for r in rows:
        if r["chosen"]:
            o.append('<circle class="chosen-ring" cx="%.1f" cy="%.1f" r="10" fill="none" stroke="#d00" '
                     'stroke-width="2.5"/>' % (X(r["p99_ms"]), Y(r["throughput_rps"])))
        if r.get("chosen_first"):   # the measurement the confirmation repeated
            o.append('<circle class="chosen-first-ring" cx="%.1f" cy="%.1f" r="10" fill="none" stroke="#d00" '
                     'stroke-width="1.5" stroke-dasharray="3,2"/>' % (X(r["p99_ms"]), Y(r["throughput_rps"])))
    o.append("</svg>")
    return "\n".join(o)


def hist_svg(hist_text, w=260, h=110):
    """Executions per batch-size bucket (inferd_batch_size's upper bounds) as bars."""
    bars = []
    for part in (hist_text or "").split(";"):
        if ":" in part:
            le, n = part.rsplit(":", 1)
            bars.append((le, int(n)))
    if not bars:
        return '<p class="na">no batch-size histogram (the server exports none)</p>'
    top = max(n for _, n in bars)
    bw = (w - 20) / len(bars)
    o = ['<svg class="hist" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">' % (w, h)]
    for i, (le, n) in enumerate(bars):
        bh = (h - 35) * n / top
        x = 10 + i * bw
        o.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#4a90d9"><title>batch &lt;= %s: %d '
                 'executions</title></rect>' % (x + 1, h - 20 - bh, max(bw - 2, 1), bh, _e(le), n))
        o.append('<text x="%.1f" y="%d" font-size="9" text-anchor="middle">%s</text>' % (x + bw / 2, h - 8, _e(le)))
        o.append('<text x="%.1f" y="%.1f" font-size="9" text-anchor="middle">%d</text>' % (
            x + bw / 2, h - 23 - bh, n))
    o.append("</svg>")
    return "".join(o)


TABLE_COLS = [("point", "#"), ("label", "configuration"), ("phase", "phase"), ("level", "level"),
              ("throughput_rps", "infer/s"),
              ("p50_ms", "p50 ms"), ("p90_ms", "p90 ms"), ("p99_ms", "p99 ms"), ("errors", "errors"),
              ("queue_ms", "queue ms"), ("compute_infer_ms", "infer ms"), ("avg_batch", "avg batch"),
              ("gpu_busy", "GPU busy"), ("gpu_util", "GPU util"), ("feasible", "meets"), ("pareto", "Pareto")]

CSS = """body{font:14px sans-serif;margin:20px;max-width:1200px}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td.l,th.l{text-align:left;white-space:nowrap}
tr.chosen{background:#ffe0e0;font-weight:bold}tr.pareto td:first-child{border-left:4px solid #e08000}
.cfg{border:1px solid #ddd;padding:6px 10px;margin:10px 0}.cfg.best{border:2px solid #d00}
.na{color:#888}code,pre{background:#f6f6f6}.legend span{margin-right:16px}"""


def write_html(path, rows, search, best, meta, best_pbtxt):
    obj = search.obj
    o = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>inferd-tune: %s</title>' % _e(
        meta["model"]), "<style>%s</style></head><body>" % CSS]
    o.append("<h1>inferd-tune: %s</h1>" % _e(meta["model"]))
    o.append("<p>Objective: <b>%s</b>. %d points over %d configurations measured (%d skipped or failed) in %.0f s, "
             "of a grid of %d configurations; load: %s, %g s per level.%s</p>" % (
                 _e(obj.describe()), len(rows), len({r["config"] for r in rows}), meta["not_measured"],
                 meta["elapsed_s"], meta["grid"], _e(meta["load"]), meta["duration_s"],
                 " Stopped early: %s." % _e(search.stopped) if search.stopped else ""))
    if best is not None:
        bp = best.worse or best.best_point
        met = (best.final or best.score)[0]
        o.append('<p id="chosen">Chosen: <b>%s</b> at level %s: %s infer/s, p99 %s ms%s (%s).</p>' % (
            _e(best.cfg.label()), _fmt(bp["level"]), _fmt(bp["throughput_rps"]), _fmt(bp["p99_ms"]),
            ", the worse of its two measurements (%d finalists were measured again after the search, each "
            "ranked so)" % len(search.confirmed) if best.worse else "",
            "meets the objective" if met else "NO configuration met the objective; the nearest"))
    else:
        o.append('<p id="chosen">No configuration could be measured.</p>')
    o.append('<h2>Throughput against p99 latency</h2><p class="legend"><span>blue: meets the objective</span>'
             '<span>grey: misses it</span><span>orange line: the Pareto front</span>'
             '<span>red ring: chosen (dashed: the measurement its confirmation repeated)</span></p>')
    if rows:
        o.append(scatter_svg(rows, obj))
    o.append('<h2>Every point</h2><table id="points"><thead><tr>%s</tr></thead><tbody>' % "".join(
        '<th class="%s">%s</th>' % ("l" if k == "label" else "", _e(t)) for k, t in TABLE_COLS))
    for r in rows:
        cls = " ".join(c for c, f in (("point", True), ("chosen", r["chosen"]), ("pareto", r["pareto"])) if f)
        o.append('<tr class="%s" data-point="%d">%s</tr>' % (cls, r["point"], "".join(
            '<td class="%s">%s</td>' % ("l" if k == "label" else "", _e(_fmt(r.get(k)))) for k, _ in TABLE_COLS)))
    o.append("</tbody></table>")
    o.append("<h2>Configurations</h2>")
    for ci, res in enumerate([r for r in search.results.values() if r.points]):
        mine = [r for r in rows if r["config"] == ci + 1]
        deciding = mine[res.chosen_index] if res.chosen_index is not None else mine[-1]
        o.append('<div class="cfg%s" id="config-%d"><h3>%d. %s</h3>' % (
            " best" if res is best else "", ci + 1, ci + 1, _e(res.cfg.label())))
        o.append("<p>preferred sizes [%s]; sweep ended: %s; %s.</p>" % (
            _e(deciding["preferred_sizes"]), _e(res.stop or "-"),
            "meets the objective" if (res.final or res.score)[0] else "misses the objective"))
        o.append("<table><tr><th>phase</th><th>level</th><th>infer/s</th><th>p99 ms</th><th>queue ms</th>"
                 "<th>infer ms</th>"
                 "<th>avg batch</th><th>GPU busy</th><th>GPU util</th><th>GPU MiB</th></tr>")
        for r in mine:
            o.append("<tr>%s</tr>" % "".join("<td>%s</td>" % _e(_fmt(r.get(k))) for k in (
                "phase", "level", "throughput_rps", "p99_ms", "queue_ms", "compute_infer_ms", "avg_batch", "gpu_busy",
                "gpu_util", "gpu_mem_mib")))
        o.append("</table><p>Batch sizes at level %s (executions per bucket of inferd_batch_size):</p>%s</div>" % (
            _fmt(deciding["level"]), hist_svg(deciding.get("batch_hist"))))
    others = [r for r in search.results.values() if not r.points]
    if others:
        o.append("<h2>Not measured</h2><ul>")
        for r in others:
            o.append("<li>%s: %s</li>" % (_e(r.cfg.label()), _e(r.failed or r.skipped)))
        o.append("</ul>")
    if best_pbtxt:
        o.append("<h2>config.pbtxt written</h2><pre>%s</pre>" % _e(best_pbtxt))
    o.append("</body></html>")
    with open(path, "w") as f:
        f.write("\n".join(o))
