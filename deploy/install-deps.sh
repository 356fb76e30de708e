#!/usr/bin/env bash
# Installs what inferd needs on Debian 12 (apt-get) and the Python test and
# client tools into ./.venv (pip). Safe to run again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
pkgs=(build-essential cmake pkg-config git
      libgrpc-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler grpc-proto
      libprotobuf-dev libuv1-dev libopenblas-dev libhttp-parser-dev
      libcjson-dev  # JSON of the KServe v2 REST API (server/http/rest.c)
      libpcre2-dev  # the LLM tokenizer's pre-tokenizer regexes: \p{L}, \p{N}, lookahead (engine/llm/tokenizer_load.c)
      libutf8proc-dev  # the tokenizer's NFC/NFKC normalizers (Qwen2's tokenizer.json: engine/llm/tokenizer_pretok.c)
      zlib1g-dev  # gzip/deflate bodies of the REST API (server/http/httpz.c; gRPC links libz already)
      libssl-dev  # libcrypto: server/sec/tls.c checks the certificate files at start; libssl: HTTPS (server/http/http_tls.c)
      openssl  # tests: the CLI makes the CA and certificates of tests/integration/test_tls.py and test_https.py
      libjemalloc-dev  # the server's malloc: RSS stays flat under cancel-heavy load (server/main.cmake)
      libdnnl-dev  # oneDNN: the CPU's Conv/ConvTranspose/pooling primitives (engine/cpu/conv_dnnl.c)
      clang libclang-rt-dev libomp-dev  # tests/fuzz: libFuzzer + ASan/UBSan runtimes, OpenMP for clang builds
      python3 python3-venv python3-pip curl
      prometheus chromium chromium-driver  # tests: promtool lints /metrics; headless Chromium loads /dashboard and inferd-tune's report.html
      libb64-0d  # perf_analyzer (deploy/install-perf-analyzer.sh)
      nginx  # tests: deploy/lb's gRPC balancer in front of three servers (tests/integration/test_deploy_lb.py)
      shellcheck)  # tests: lints deploy/'s shell scripts (tests/integration/test_deploy_manifests.py)
# cuDNN (GPU convolutions and pooling, engine/cuda/cuda_conv.c) is not installed
# here: Debian 12 packages no cuDNN 9 for CUDA 13. GPU builds take it from
# PyPI's wheel into a git-ignored folder of the checkout, where CMake finds
# it by default (or point CUDNN_ROOT at any folder holding include/cudnn.h
# and lib/libcudnn.so.9):
#   python3 -m pip install --target .cudnn nvidia-cudnn-cu13
#   cmake --preset default     # finds .cudnn/nvidia/cudnn; or -DCUDNN_ROOT=...
# Without it the build goes on (INFERD_CUDNN=AUTO) and GPU instances cannot
# run convolutions with cuDNN; CPU-only builds never need it.
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -x "$root/.venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$root/.venv"
fi
"$root/.venv/bin/pip" install -q --upgrade pip
"$root/.venv/bin/pip" install -q -r "$root/tests/requirements.txt"
# Triton's perf_analyzer for the compatibility test (which skips, saying why, if this fails)
bash "$root/deploy/install-perf-analyzer.sh" || echo "warning: perf_analyzer could not be installed" >&2
