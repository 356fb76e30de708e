#!/usr/bin/env bash
# Proves the README's two commands on a truly fresh Debian 12: makes a minimal
# bookworm root with mmdebstrap (from this host's own apt sources), clones this
# repository into it and, inside it,
#   1. runs `bash deploy/quickstart.sh` until it prints "inferd ready", then a
#      tritonclient request from OUTSIDE the root must be answered (and match
#      onnxruntime);
#   2. runs `bash tests/run.sh` (the whole suite);
#   3. builds every CMake build type with warnings as errors: Release (GCC at
#      -O3), Debug, MinSizeRel, and Release with the host's CUDA toolkit
#      mounted in (when the host has one), so no build type breaks unseen.
# Nothing from the host's packages or earlier runs is visible inside. What it
# started is killed by PID, its mounts live in a private mount namespace (gone
# with its processes) and the root is removed, on every exit path.
#
# Needs root (mmdebstrap, mount, chroot). Clones HEAD: commit what you want
# tested. INFERD_FRESH_KEEP=1 keeps the root for a look afterwards;
# INFERD_FRESH_STEPS="quickstart tests builds" picks steps (default: all).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
steps=${INFERD_FRESH_STEPS:-quickstart tests builds}
t0=$(date +%s)
say() { printf '\n=== [fresh %4ds] %s\n' $(($(date +%s) - t0)) "$*"; }

[ "$(id -u)" = 0 ] || { echo "tests/fresh_machine.sh must run as root (mmdebstrap, mount, chroot)" >&2; exit 2; }
# The host needs mmdebstrap for the root and a python3 with venv for the outside client.
host_pkgs=()
command -v mmdebstrap >/dev/null || host_pkgs+=(mmdebstrap)
python3 -c 'import ensurepip, venv' 2>/dev/null || host_pkgs+=(python3-venv)
if [ ${#host_pkgs[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${host_pkgs[@]}" >/dev/null
fi

work=$(mktemp -d "${TMPDIR:-/var/tmp}/inferd-fresh.XXXXXX")
root=$work/root
pids=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do
    # unshare --kill-child: its death kills the namespace's init, and with it every process inside.
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  # Mounts were made in private namespaces; anything still under the root here is a leak: undo it.
  if findmnt -rn -o TARGET | grep -q "^$root/"; then
    findmnt -rn -o TARGET | grep "^$root/" | sort -r | xargs -r -n1 umount -l || true
  fi
  if [ "${INFERD_FRESH_KEEP:-0}" = 1 ]; then
    echo "fresh root kept at $root" >&2
  else
    rm -rf --one-file-system "$work"
  fi
  say "done (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a command in the background, tracked for cleanup, and waits for it: a signal to this script
# then interrupts the wait at once (bash defers traps while a foreground child runs).
tracked() {
  "$@" <&0 &  # stdin kept (the outside client reads its script from a here-document)
  local p=$! rc=0
  pids+=("$p")
  wait "$p" || rc=$?
  pids=("${pids[@]/$p}")
  return "$rc"
}

# --- the root, from this host's own apt sources and apt settings (validity, proxies)
say "making a fresh Debian 12 root in $root"
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -s "$f" ] && grep -qE '^[[:space:]]*(deb|URIs:)' "$f" && grep -qi debian "$f" && sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || { echo "no Debian apt sources found under /etc/apt" >&2; exit 2; }
aptopts=()
for f in /etc/apt/apt.conf.d/*; do
  [ -f "$f" ] && grep -qE '^[[:space:]]*Acquire::' "$f" && aptopts+=("--aptopt=$f")
done
tracked mmdebstrap --quiet --variant=apt "${aptopts[@]}" bookworm "$root" "${sources[@]}"

# What every installed system and container runtime provides and a bare root lacks: localhost
# (chromedriver and selenium meet on it).
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"

# pip reaches PyPI here through the host's CA bundle: copy it under a name the root's own
# ca-certificates (installed later, regenerating ca-certificates.crt) leaves alone.
mkdir -p "$root/etc/ssl"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/host-ca-bundle.crt"
{
  [ -f /etc/pip.conf ] && grep -v -E '^[[:space:]]*cert[[:space:]]*=' /etc/pip.conf || echo "[global]"
} >"$root/etc/pip.conf"
sed -i '/^\[global\]/a cert = /etc/ssl/host-ca-bundle.crt' "$root/etc/pip.conf"
grep -q '^\[global\]' "$root/etc/pip.conf" || printf '[global]\ncert = /etc/ssl/host-ca-bundle.crt\n' >>"$root/etc/pip.conf"

say "cloning $src (HEAD $(git -C "$src" rev-parse --short HEAD)) into the root"
git clone -q "$src" "$root/root/inferd"

# Runs a command in the root as a new user's login shell would, in its own mount and PID
# namespaces: /proc, /dev, /dev/shm, /sys mounted for it alone; nothing of the host's environment.
# $1: a path under the host to mount at the same path inside (read-only), or "".
in_root() {
  local extra=$1
  shift
  # exec: run in the background, this subshell IS unshare, so killing its PID ends the namespace.
  exec unshare --mount --pid --fork --kill-child=SIGKILL --propagation private -- /bin/bash -c '
    set -e
    r=$1 extra=$2; shift 2
    # The root is a mount point of its own, as in a container: tools that change mount
    # propagation (unshare --mount in the tests) need "/" to be one.
    mount --bind "$r" "$r"
    mount -t proc proc "$r/proc"
    mount --bind /dev "$r/dev"
    mount -t tmpfs -o mode=1777,size=8g shm "$r/dev/shm"
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$r/dev/pts" 2>/dev/null || true
    mount --rbind /sys "$r/sys"
    mount -t tmpfs -o mode=1777 tmp "$r/tmp"
    if [ -n "$extra" ]; then
      mkdir -p "$r$extra"
      mount --bind -o ro "$extra" "$r$extra"
    fi
    exec chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      /bin/bash -c "cd /root/inferd && $*"
  ' in_root "$root" "$extra" "$@"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# --- 1. bash deploy/quickstart.sh, until it serves; then a request from outside
if [[ " $steps " == *" quickstart "* ]]; then
  grpc_port=$(free_port)
  http_port=$(free_port)
  say "README command 1: bash deploy/quickstart.sh (gRPC $grpc_port, HTTP $http_port)"
  log=$work/quickstart.log
  (in_root "" "GRPC_PORT=$grpc_port HTTP_PORT=$http_port bash deploy/quickstart.sh" >"$log" 2>&1) &
  qs=$!
  pids+=("$qs")
  # The client is set up on the host meanwhile (it must not come from the root).
  tracked python3 -m venv "$work/client"
  tracked "$work/client/bin/pip" install -q "tritonclient[grpc]" numpy onnxruntime
  until grep -q '^inferd ready' "$log"; do
    if ! kill -0 "$qs" 2>/dev/null; then
      wait "$qs" && rc=0 || rc=$?
      echo "deploy/quickstart.sh ended (exit $rc) before serving; its output:" >&2
      tail -n 60 "$log" >&2
      exit 1
    fi
    sleep 2 & wait $!  # a process in another root: its log is the only signal there is to poll
  done
  grep '^inferd ready' "$log"
  say "a tritonclient request from outside the root"
  tracked "$work/client/bin/python" - "$grpc_port" "$root/root/inferd/example_repo" <<'PY'
import glob, sys
import numpy as np
import onnxruntime as ort
import tritonclient.grpc as grpcclient

port, repo = sys.argv[1], sys.argv[2]
c = grpcclient.InferenceServerClient("127.0.0.1:%s" % port)
assert c.is_server_live() and c.is_server_ready(), "server not live/ready"
models = [m.name for m in c.get_model_repository_index().models]
assert models, "the example repository serves no model"
for name in models:
    md = c.get_model_metadata(name)
    onnx = sorted(glob.glob("%s/%s/*/model.onnx" % (repo, name)))[-1]
    sess = ort.InferenceSession(onnx, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    feeds, inputs = {}, []
    for t in md.inputs:
        shape = [2 if d < 0 else d for d in t.shape]
        x = rng.standard_normal(shape).astype(np.float32)
        feeds[t.name] = x
        i = grpcclient.InferInput(t.name, shape, t.datatype)
        i.set_data_from_numpy(x)
        inputs.append(i)
    r = c.infer(name, inputs)
    want = sess.run(None, feeds)
    for t, w in zip(sess.get_outputs(), want):
        got = r.as_numpy(t.name)
        assert got is not None and got.shape == w.shape, (t.name, None if got is None else got.shape, w.shape)
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4)
    print("model %s answered %s, matching onnxruntime" % (name, [o.name for o in md.outputs]))
PY
  kill -KILL "$qs" 2>/dev/null || true
  wait "$qs" 2>/dev/null || true
  say "quickstart served and answered"
fi

# --- 2. bash tests/run.sh, the whole suite
if [[ " $steps " == *" tests "* ]]; then
  say "README command 2: bash tests/run.sh"
  tracked in_root "" "bash tests/run.sh"
  say "tests/run.sh passed"
fi

# --- 3. every build type, warnings as errors (a user's plain build leaves them off)
if [[ " $steps " == *" builds "* ]]; then
  for bt in Release Debug MinSizeRel; do
    say "build type $bt, -DINFERD_WERROR=ON, no CUDA"
    tracked in_root "" "cmake -S . -B /tmp/b-$bt -DCMAKE_BUILD_TYPE=$bt -DINFERD_WERROR=ON -DINFERD_CUDA=OFF >/dev/null && cmake --build /tmp/b-$bt -j \$(nproc) >/dev/null && echo built $bt"
  done
  cuda=$(readlink -f /usr/local/cuda 2>/dev/null || true)
  if [ -n "$cuda" ] && [ -x "$cuda/bin/nvcc" ]; then
    # as the toolkit's installer leaves it: /usr/local/cuda -> the versioned folder
    ln -sfn "$(basename "$cuda")" "$root/usr/local/cuda"
    cudnn_v=$(sed -n 's/^ARG CUDNN_WHEEL_VERSION=//p' "$src/deploy/Dockerfile")
    say "build type Release with CUDA ($cuda from the host) and cuDNN $cudnn_v (PyPI, as the CUDA image has it), -DINFERD_WERROR=ON"
    tracked in_root "$cuda" ".venv/bin/pip install -q --no-deps --target /tmp/cudnn nvidia-cudnn-cu13==$cudnn_v && cmake -S . -B /tmp/b-cuda -DCMAKE_BUILD_TYPE=Release -DINFERD_WERROR=ON -DINFERD_CUDA=ON -DINFERD_CUDNN=ON -DCUDNN_ROOT=/tmp/cudnn/nvidia/cudnn -DCMAKE_CUDA_COMPILER=$cuda/bin/nvcc -DCUDAToolkit_ROOT=$cuda >/dev/null && cmake --build /tmp/b-cuda -j \$(nproc) >/dev/null && echo built Release with CUDA and cuDNN"
  else
    say "no CUDA toolkit on this host: the CUDA build is skipped"
  fi
fi
say "fresh machine: all steps passed ($steps)"
