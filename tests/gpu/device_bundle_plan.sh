#!/usr/bin/env bash
# Gathers what a GPU machine needs to check the CUDA plan with cuDNN (the
# conv family) into one folder (argument; default .devrun-plan): the GPU
# plan and cuDNN tests, the server, the non-CUDA shared libraries they load
# (oneDNN and OpenBLAS included, in one lib.tar.xz: the device call carries
# at most 64 MiB), the models gen_test_models.py writes, a model repository
# with KIND_GPU conv models, and run.sh, the script to run there:
#   bash <folder>/run.sh <folder> [cudnn lib dir]
# Builds nothing: run it after `cmake --build --preset default` (sm_90,
# cuDNN found), or set BUILD to another build folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/.devrun-plan}
build=${BUILD:-$root/build}
py=${INFERD_PYTHON:-$root/.venv/bin/python}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/bin/test_gpu_plan" "$build/bin/test_gpu_plan_prepare" "$build/bin/test_cuda_conv" "$build/bin/inferd" "$build/bin/inferd-load" "$out/bin/"
bash "$root/tests/gpu/bundle_libs.sh" "$out"
tar -C "$out" -cJf "$out/lib.tar.xz" lib
rm -rf "${out:?}/lib"
"$py" "$root/tests/unit/engine/gen_test_models.py" "$out/gpu_plan_models" >/dev/null 2>&1
# the server's repository: conv_resnet and conv_transpose_net at fp32 and fp16 on a GPU instance
for model in conv_resnet conv_transpose_net; do
for prec in fp32 fp16; do
  d="$out/repo/${model}_$prec"
  mkdir -p "$d/1"
  cp "$out/gpu_plan_models/$model.onnx" "$d/1/model.onnx"
  cat > "$d/config.pbtxt" <<CFG
name: "${model}_$prec"
backend: "onnxruntime"
max_batch_size: 4
instance_group [
  {
    count: 1
    kind: KIND_GPU
    gpus: [ 0 ]
  }
]
dynamic_batching { }
parameters {
  key: "precision"
  value { string_value: "$prec" }
}
CFG
done
done
cp "$root/tests/gpu/device_plan_run.sh" "$out/run.sh"
cp "$root/tests/gpu/device_conv_client.py" "$out/client.py"
cp "$root/tests/gpu/device_client.py" "$out/"  # client.py's import
du -sh "$out"
