#!/usr/bin/env bash
# The committed family graphs (tests/models/zoo/families/: both torch exporters' graphs of every family,
# weights stripped, refilled by fill.py) served on GPU instances and compared with onnxruntime, without
# exporting anything: the part of families.sh that fits a few minutes of a GPU machine. PyTorch as the
# oracle needs families.sh (it exports there). The graphs are split round-robin over PARTS servers that
# run side by side (one GPU holds them all), each under `timeout` so the tables come back when one hangs.
#
#   bash tests/models/zoo/families_ort_gpu.sh INFERD_BIN OUT_DIR [PYTHON]
#     PYTHON default /opt/torch/.venv/bin/python (numpy, onnx, onnxruntime)
# Env: PARTS (8), KIND (gpu; cpu for a dry run here), SECS (each part's limit, 170), FAMILIES (name,... some).
# Each part's server may take all of SECS but 30 to load its graphs (INFERD_START_TIMEOUT): on the H200 a server
# of 37 graphs was not ready within the test library's 90 s (2026-12-04), one of 38 was.
# Writes OUT_DIR/partN.{log,json}, OUT_DIR/summary.txt; exit status 0 when every graph loads and matches.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: families_ort_gpu.sh INFERD_BIN OUT_DIR [PYTHON]}
out=${2:?usage: families_ort_gpu.sh INFERD_BIN OUT_DIR [PYTHON]}
py=${3:-/opt/torch/.venv/bin/python}
PARTS=${PARTS:-8} KIND=${KIND:-gpu} SECS=${SECS:-170}
mkdir -p "$out"
mapfile -t parts < <("$py" - "$here/families" "$PARTS" "${FAMILIES:-}" <<'EOF'
import os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import check_families
graphs = sorted(check_families.list_graphs(sys.argv[1]))
want = [w for w in sys.argv[3].split(",") if w]
if want:
    graphs = [g for g in graphs if g in want or g.split(".")[0] in want]
n = int(sys.argv[2])
for i in range(n):
    print(",".join(graphs[i::n]))
EOF
)
pids=()
for i in "${!parts[@]}"; do
  [ -n "${parts[$i]}" ] || continue
  INFERD_START_TIMEOUT=$((SECS > 60 ? SECS - 30 : 30)) timeout -k 5 "$SECS" "$py" "$here/check_families.py" --graphs "$here/families" --inferd "$bin" --kind "$KIND" \
    --only "${parts[$i]}" --json "$out/part$i.json" >"$out/part$i.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
{
  echo "date: $(date -u '+%F %T UTC'); kind $KIND; $PARTS parts"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  grep -h " of .* graphs load and match" "$out"/part*.log
  grep -h "loads=" "$out"/part*.log | grep -v "loads=True ort=True" || echo "every graph served loads and matches"
  for i in "${!parts[@]}"; do
    n_want=$(tr ',' '\n' <<<"${parts[$i]}" | grep -c .)
    n_seen=$(grep -c "loads=" "$out/part$i.log" 2>/dev/null)
    [ "$n_seen" -eq "$n_want" ] || echo "part $i: $n_seen of its $n_want graphs reported (cut off, or the server did not start)"
  done
} | tee "$out/summary.txt"
exit $rc
