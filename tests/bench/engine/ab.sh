#!/usr/bin/env bash
# Two builds of the engine side by side on the GPU machine: bench_engine from BASE_DIR and from HEAD_DIR,
# alternating (base, head, base, head...) on the same ONNX models, so that a change meant to move code
# and not behaviour shows its cost, or its absence, as a ratio measured in one call.
#
#   tests/bench/engine/ab.sh BASE_DIR HEAD_DIR OUT_DIR MODEL.onnx [MODEL.onnx ...]
#
# BASE_DIR and HEAD_DIR each hold a bench_engine. Writes OUT_DIR/ab.jsonl (every line, with "build" and
# "round" added) and OUT_DIR/ab.md, the table (per model, precision and batch: each build's median
# us_per_batch over the rounds, their ratio head/base and the spread of each), and prints the table.
# env: ROUNDS (default 3), PRECISIONS (default "fp32 fp16"), BATCHES (default 1,8,64), ENGINE_ARGS,
#      PYTHON (default python3).
set -u
[ $# -ge 4 ] || { echo "usage: $0 BASE_DIR HEAD_DIR OUT_DIR MODEL.onnx..." >&2; exit 2; }
BASE=$1 HEAD=$2 OUT=$3
shift 3
PY=${PYTHON:-python3}
mkdir -p "$OUT"
RES=$OUT/ab.jsonl
: >"$RES"
for m in "$@"; do
  for prec in ${PRECISIONS:-fp32 fp16}; do
    for round in $(seq 1 "${ROUNDS:-3}"); do
      for build in base head; do
        dir=$BASE
        [ $build = head ] && dir=$HEAD
        # shellcheck disable=SC2086
        "$dir/bench_engine" --model "$m" --precision "$prec" --batches "${BATCHES:-1,8,64}" ${ENGINE_ARGS:-} \
          2>>"$OUT/ab_$build.log" | grep '^{' |
          sed "s/^{/{\"build\":\"$build\",\"round\":$round,/" >>"$RES" ||
          echo "bench_engine ($build) failed on $m $prec: see $OUT/ab_$build.log" >&2
      done
    done
  done
done
"$PY" - "$RES" >"$OUT/ab.md" <<'PY'
import json, sys, statistics, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows[(r["model"], r["precision"], r["batch"])][r["build"]].append(r["us_per_batch"])
print("| model | precision | batch | base us (min-max) | head us (min-max) | head/base |")
print("|---|---|---:|---|---|---:|")
for (m, p, b), v in sorted(rows.items()):
    med = {k: statistics.median(x) for k, x in v.items()}
    span = {k: "%.1f (%.1f-%.1f)" % (med[k], min(x), max(x)) for k, x in v.items()}
    ratio = "%.3f" % (med["head"] / med["base"]) if "head" in med and "base" in med else "-"
    print("| %s | %s | %d | %s | %s | %s |" % (m, p, b, span.get("base", "-"), span.get("head", "-"), ratio))
PY
cat "$OUT/ab.md"
