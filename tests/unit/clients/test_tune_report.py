"""inferd-tune's outputs (clients/tune/report.py) from a search over a synthetic landscape, no server and
no browser: points.csv has a row per measured point with the Pareto front and the chosen point right,
and report.html is one self-contained file (no script, nothing fetched) with a mark per point in its
plot and a table row per point. tests/integration/test_tune.py opens a real run's page in Chromium."""

import csv
import html.parser
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients"))
from test_tune_search import LEVELS, FakeBench, _space  # noqa: E402
from tune import report as R  # noqa: E402
from tune import search as S  # noqa: E402


class Page(html.parser.HTMLParser):
    """The tags of a page with their attributes, and which table each <tr> sits in."""

    def __init__(self):
        super().__init__()
        self.tags, self.stack, self.rows_in = [], [], {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table":
            self.stack.append(a.get("id"))
        if tag == "tr" and self.stack:
            self.rows_in[self.stack[-1]] = self.rows_in.get(self.stack[-1], 0) + 1

    def handle_endtag(self, tag):
        if tag == "table" and self.stack:
            self.stack.pop()

    def having(self, tag, cls):
        return [a for t, a in self.tags if t == tag and cls in (a.get("class") or "").split()]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    space, obj = _space(), S.Objective("throughput", p99_ms=20.0)
    bench = FakeBench()
    search = S.Search(space, obj, bench, LEVELS, budget_s=1e12, clock=bench.clock, confirm=2, retry_miss=True)
    best = search.run()
    rows = R.rows_of(search, "concurrency", best)
    out = tmp_path_factory.mktemp("report")
    R.write_csv(str(out / "points.csv"), rows)
    R.write_html(str(out / "report.html"), rows, search, best, {
        "model": "m<&>", "elapsed_s": bench.now, "grid": len(space.grid()), "not_measured": 0,
        "load": "concurrency", "duration_s": 1.0}, 'name: "m"\n')
    return search, best, rows, out


def test_csv_rows_pareto_and_chosen(run):
    search, best, rows, out = run
    with open(out / "points.csv", newline="") as f:
        got = list(csv.DictReader(f))
    assert len(got) == len(rows) == search.measured_points()
    assert list(got[0].keys()) == R.COLUMNS
    pts = [(float(r["throughput_rps"]), float(r["p99_ms"])) for r in got]
    for r, (t, p) in zip(got, pts):   # the front, brute force: nothing at least as good on both, better on one
        dominated = any(t2 >= t and p2 <= p and (t2 > t or p2 < p) for t2, p2 in pts)
        assert r["pareto"] == ("0" if dominated else "1"), r
    chosen = [r for r in got if r["chosen"] == "1"]
    assert len(chosen) == 1 and chosen[0]["phase"] == "confirm" and chosen[0]["label"] == best.cfg.label()
    assert {r["phase"] for r in got} <= {"search", "retry", "refine", "confirm"}


def test_html_is_self_contained_with_a_mark_and_row_per_point(run):
    search, best, rows, out = run
    text = (out / "report.html").read_text()
    p = Page()
    p.feed(text)
    assert not [t for t, _ in p.tags if t in ("script", "link", "img", "iframe")]
    assert not [a for _, a in p.tags if any(str(v).startswith(("http:", "https:", "//")) for k, v in a.items()
                                              if k in ("src", "href"))]
    marks = p.having("circle", "pt")
    assert sorted(int(a["data-point"]) for a in marks) == list(range(1, len(rows) + 1))
    assert len(p.having("circle", "chosen")) == 1 and len(p.having("circle", "chosen-ring")) == 1
    assert len(p.having("circle", "pareto")) == sum(r["pareto"] for r in rows)
    assert p.having("polyline", "pareto-front") and p.having("line", "target")
    assert p.rows_in["points"] == len(rows) + 1   # the header row too
    assert len(p.having("div", "cfg")) == len([r for r in search.results.values() if r.points])
    assert "m&lt;&amp;&gt;" in text and "m<&>" not in text   # the model's name escaped
    for a in marks:   # inside the 760 x 440 plot
        assert 0 <= float(a["cx"]) <= 760 and 0 <= float(a["cy"]) <= 440, a


def test_ticks_cover_the_range():
    for lo, hi in ((0.0, 5281.0), (0.0, 0.7), (0.0, 12.0), (0.0, 1e6)):
        t = R._ticks(lo, hi)
        assert t[0] <= lo and t[-1] >= hi and len(t) <= 12, (lo, hi, t)
    t = R._log_ticks(0.3, 190.0)
    assert t[0] <= 0.3 and t[-1] >= 190.0 and t == sorted(t)
