#!/usr/bin/env bash
# Installs Triton's perf_analyzer into ./.venv/bin for the compatibility test
# and benchmarks. The PyPI package "perf-analyzer" is an empty placeholder;
# the binary ships inside tritonclient's manylinux wheels (2.50.0 pinned here; 2.51.0 carries one too), which
# needs libb64 (Debian: libb64-0d) and libcudart.so.12 (PyPI:
# nvidia-cuda-runtime-cu12; no GPU is needed to run it). Only the binary is
# taken from that wheel, so the venv keeps its newer tritonclient.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.venv
[ -x "$venv/bin/python" ] || { echo "run deploy/install-deps.sh first" >&2; exit 1; }
if [ -x "$venv/bin/perf_analyzer" ] && "$venv/bin/perf_analyzer" --version >/dev/null 2>&1; then exit 0; fi
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
dpkg -s libb64-0d >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends libb64-0d
"$venv/bin/pip" install -q nvidia-cuda-runtime-cu12
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$venv/bin/pip" download -q --no-deps --only-binary=:all: --platform manylinux1_x86_64 --python-version 3.11 \
  "tritonclient==2.50.0" -d "$tmp"
(cd "$tmp" && python3 -m zipfile -e tritonclient-2.50.0-py3-none-manylinux1_x86_64.whl x >/dev/null)
install -m 0755 "$tmp/x/tritonclient-2.50.0.data/data/bin/perf_analyzer" "$venv/bin/perf_analyzer.bin"
cudart=$("$venv/bin/python" -c 'import nvidia.cuda_runtime, os; print(os.path.join(list(nvidia.cuda_runtime.__path__)[0], "lib"))')
cat >"$venv/bin/perf_analyzer" <<WRAP
#!/usr/bin/env bash
# perf_analyzer from tritonclient 2.50.0 (deploy/install-perf-analyzer.sh), with its libcudart.so.12
export LD_LIBRARY_PATH=$cudart\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
exec "$venv/bin/perf_analyzer.bin" "\$@"
WRAP
chmod +x "$venv/bin/perf_analyzer"
"$venv/bin/perf_analyzer" --version >/dev/null 2>&1 || { echo "perf_analyzer does not run here" >&2; exit 1; }
echo "perf_analyzer installed: $venv/bin/perf_analyzer"
