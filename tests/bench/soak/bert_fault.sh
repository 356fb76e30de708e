#!/usr/bin/env bash
# Splits the suspects of BERT-base's sticky cudaErrorLaunchFailure (tests/bench/RESULTS.md, "The soak again at
# 18033ae"): the fault came within ~15 s when BERT's server shared the GPU with a loaded ResNet-50 server and its
# clients were killed with calls in flight, never on BERT's server alone. Each variant below runs that loop for
# SECS (default 70) and prints one line: the variant, client kills, whether BERT's server still reports live,
# and its first fault line.
#
#   bash tests/bench/soak/bert_fault.sh BUNDLE_DIR [VARIANT...]
#
# BUNDLE_DIR: a device bundle (bin/inferd, bin/inferd-load, lib.tar.xz); copied to /tmp/bert_fault/b first, so
# a later call's `carry` of the same folder cannot pull the libraries from under a run. Needs /tmp/bert.onnx
# (tests/bench/bert/bench_torch_bert.py's export; made here with TORCH_PYTHON when missing) and ResNet-50's
# repository (tests/bench/soak/zoo_repo.py, made when missing).
# Variants (default: all, in this order): base (as the soak: 2 instances, graphs on), alone (no ResNet-50 server),
# blocking (CUDA_LAUNCH_BLOCKING=1 in BERT's server), one (1 instance), nographs (optimization graphs false),
# nocancel (the load without cancels or deadlines: mix 100:0:0:0, clients still killed), torchload (no ResNet-50
# server: a PyTorch process keeps the GPU busy beside BERT's instead, so the GPU is shared by a process that is
# not ours), blocknog (blocking and nographs: every launch waited for, so the failing one names itself), noattn
# (fuse_attention "0": the exported attention nodes as they are, without kernels/attn), gpucore (base, and the
# driver writes a GPU core at the fault: $W/gpucore.PID), newcublas (BERT's server loads the cuBLAS of PyTorch's
# wheels first), noclusters (base with gemm_clusters "false": cuBLASLt's algorithms without thread-block
# clusters, the cluster-8 nvjet kernel the GPU core named left out).
set -u
SRC=$1; shift
VARIANTS=${*:-base alone blocking one nographs nocancel}
SECS=${SECS:-70}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
TPY=${TORCH_PYTHON:-/opt/torch/.venv/bin/python}
W=/tmp/bert_fault
B=$W/b
mkdir -p $W
if [ ! -x $B/bin/inferd ]; then
  rm -rf $B && cp -r "$SRC" $B && rm -rf $B/lib && tar -C $B -xJf $B/lib.tar.xz
fi
cudnn=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
export LD_LIBRARY_PATH=$B/lib:$cudnn:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
if [ ! -f /tmp/bert.onnx ]; then
  (cd "$ROOT/tests/bench/bert" && "$TPY" -c "
import torch
from bench_torch_bert import build, export
export(torch, build(torch), '/tmp/bert.onnx')") >$W/export.log 2>&1 || { echo "export failed: $W/export.log"; exit 1; }
fi
R=$W/repos
[ -d $R/bert_base ] || "$TPY" "$HERE/zoo_repo.py" $R --bert-onnx /tmp/bert.onnx >$W/repos.txt 2>$W/repos.log \
  || { echo "zoo_repo.py failed: $W/repos.log"; exit 1; }

# a copy of BERT's repository per variant, its config changed as the variant asks
variant_repo() {
  local v=$1 d=$W/repo_$1
  rm -rf $d && cp -al $R/bert_base $d 2>/dev/null || cp -r $R/bert_base $d
  local c=$d/bert_base/config.pbtxt
  cp --remove-destination "$(readlink -f $c)" $c.new && mv $c.new $c
  case $v in
    one) sed -i 's/count: [0-9]*/count: 1/' $c ;;
    nographs|blocknog) echo 'optimization { cuda { graphs: false } }' >>$c ;;
    noattn) echo 'parameters { key: "fuse_attention" value { string_value: "0" } }' >>$c ;;
    noclusters) echo 'parameters { key: "gemm_clusters" value { string_value: "false" } }' >>$c ;;
  esac
  echo $d
}

run() {
  local v=$1 repo env=() mix=55:5:30:10 two=1
  repo=$(variant_repo $v)
  [ $v = alone ] && two=0
  [ $v = torchload ] && two=0
  [ $v = blocking ] || [ $v = blocknog ] && env=(CUDA_LAUNCH_BLOCKING=1)
  # the driver writes the faulting kernel, block and PC to a GPU core (read with cuda-gdb: target cudacore FILE)
  # the cuBLAS PyTorch ships (a newer build than the CUDA toolkit's) before the toolkit's, in BERT's server only
  if [ $v = newcublas ]; then
    local lt
    lt=$(find /opt/torch/.venv -name 'libcublasLt.so.*' | head -1)
    env=(LD_LIBRARY_PATH=$(dirname "$lt"):$LD_LIBRARY_PATH)
    echo "newcublas: $lt"
  fi
  [ $v = gpucore ] && env=(CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_COREDUMP_FILE=$W/gpucore.%p
    CUDA_COREDUMP_GENERATION_FLAGS=skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory)
  [ $v = nocancel ] && mix=100:0:0:0
  pkill -x inferd-load; pkill -x inferd; sleep 1
  env "${env[@]}" taskset -c 8-12 $B/bin/inferd --model-repository $repo --grpc-port 9201 --http-port 9202 \
    --model-control-mode explicit --load-model '*' >$W/bert_$v.log 2>&1 &
  if [ $two = 1 ]; then
    taskset -c 0-4 $B/bin/inferd --model-repository $R/resnet50 --grpc-port 9101 --http-port 9102 \
      --model-control-mode explicit --load-model '*' >$W/resnet_$v.log 2>&1 &
  fi
  local i
  for i in $(seq 1 240); do
    curl -sf localhost:9202/v2/health/ready >/dev/null && { [ $two = 0 ] || curl -sf localhost:9102/v2/health/ready >/dev/null; } && break
    sleep 0.5
  done
  for p in $(pgrep -x inferd); do echo "pid $p cuBLASLt: $(grep -m1 -o '/[^ ]*libcublasLt[^ ]*' /proc/$p/maps)"; done
  if [ $two = 1 ]; then
    taskset -c 5-7 $B/bin/inferd-load -u 127.0.0.1:9101 -m resnet50 --concurrency-range 256 --duration-s $((SECS + 10)) \
      --threads 3 >/dev/null 2>&1 &
  fi
  local tp=
  if [ $v = torchload ]; then
    "$TPY" -c "
import time, torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.half)
t = time.time()
while time.time() - t < $((SECS + 10)):
    for _ in range(20): b = a @ a
    torch.cuda.synchronize()
" >$W/torch_$v.log 2>&1 &
    tp=$!
  fi
  local t0 n=0 lp
  t0=$(date +%s)
  while [ $(($(date +%s) - t0)) -lt $SECS ]; do
    taskset -c 13-15 $B/bin/inferd-load -u 127.0.0.1:9201 -m bert_base --concurrency-range 128 --duration-s 30 \
      --threads 3 --mix $mix --input-data $R/bert_base_data >/dev/null 2>&1 &
    lp=$!
    sleep $((2 + RANDOM % 3))
    kill -9 $lp 2>/dev/null; wait $lp 2>/dev/null
    n=$((n + 1))
    curl -sf localhost:9202/v2/health/live >/dev/null || break
  done
  echo "variant $v: $n client kills in $(($(date +%s) - t0)) s, BERT live: $(curl -s -o /dev/null -w '%{http_code}' \
localhost:9202/v2/health/live), fault lines: $(grep -c 'launch failure\|illegal' $W/bert_$v.log)"
  grep -m1 -i 'launch failure\|illegal' $W/bert_$v.log | cut -c1-300
  [ -n "$tp" ] && kill $tp 2>/dev/null
  pkill -x inferd-load; pkill -x inferd; sleep 2
}

for v in $VARIANTS; do run $v; done
