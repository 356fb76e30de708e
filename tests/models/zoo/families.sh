#!/usr/bin/env bash
# The whole family check of issue 34 on the GPU machine: every torchvision classification and
# segmentation family and every transformers encoder-only family (families.py), exported there with
# both torch exporters (export_families.py, PyTorch's outputs recorded), served by the given inferd
# WITHOUT config.pbtxt and compared with onnxruntime and PyTorch (check_families.py), on CPU
# instances and on GPU instances (a config.pbtxt holding only instance_group, which auto-complete
# fills like a missing one), then with no config file at all (KIND_AUTO: the GPU where one is seen).
#
#   tests/models/zoo/families.sh INFERD_BIN [OUT_DIR] [PYTHON]
#     INFERD_BIN  an inferd build (CUDA on for the GPU part)
#     OUT_DIR     where graphs, PyTorch's outputs, results and tables go (default ./families_out)
#     PYTHON      a python with torch, torchvision, transformers, onnx, onnxscript, onnxruntime, numpy
#                 (default /opt/torch/.venv/bin/python, the device venv); no pytest or tritonclient needed
# FAMILIES=name,... picks some; SKIP_EXPORT=1 reuses what OUT_DIR holds (the device machine allows 10
# minutes a command: export in slices, e.g. FAMILIES=tv_vgg11,tv_alexnet, then check with SKIP_EXPORT=1;
# export.json and ref/ accumulate). Exit status 0 when every exported graph loads and matches everywhere.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: families.sh INFERD_BIN [OUT_DIR] [PYTHON]}
out=${2:-families_out}
py=${3:-/opt/torch/.venv/bin/python}
only=${FAMILIES:-}
mkdir -p "$out"
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
if [ "${SKIP_EXPORT:-0}" != 1 ]; then
  "$py" "$here/export_families.py" --out "$out" --strip "$out/stripped" ${only:+--only "$only"} \
    2>&1 | tee -a "$out/export.log"
fi
rc=0
for kind in cpu gpu none; do
  "$py" "$here/check_families.py" --graphs "$out/graphs" --ref "$out/ref" --export-json "$out/export.json" \
    --inferd "$bin" --kind $kind --json "$out/check_$kind.json" --table "$out/table_$kind.md" \
    ${only:+--only "$only"} 2>&1 | tee "$out/check_$kind.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
done
echo "tables: $out/table_cpu.md $out/table_gpu.md $out/table_none.md"
exit $rc
