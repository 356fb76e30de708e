#!/usr/bin/env bash
# inferd-mig.sh: one inferd per MIG slice (or per whole GPU where MIG is off)
# on one host, each pinned with CUDA_VISIBLE_DEVICES=<MIG or GPU UUID>, on
# ports BASE_GRPC+2k / BASE_HTTP+2k (k = 0, 1, ... in `nvidia-smi -L` order),
# and the upstream list for the nginx balancer (deploy/lb/render.sh).
#
#   inferd-mig.sh --repo DIR [--bin PATH] [--base-grpc-port 8001]
#                 [--base-http-port 8000] [--host 127.0.0.1]
#                 [--upstreams-out FILE] [--log-dir DIR] [--smi-output FILE]
#                 [--dry-run] [-- EXTRA INFERD ARGS...]
#
# --dry-run        print one command per slice and write --upstreams-out; start nothing
# --smi-output F   read F instead of running `nvidia-smi -L` (tests, or a saved listing)
# --upstreams-out  one "HOST:GRPC_PORT HOST:HTTP_PORT" line per slice, '#' comments
#                  naming the slice; feed it to deploy/lb/render.sh --upstreams
# --host           the address the balancer reaches the servers on (default 127.0.0.1)
# --log-dir        each server's stderr goes to DIR/inferd-<k>.log (default ./inferd-mig-logs)
# Everything after `--` is passed to every inferd (e.g. --exit-timeout-secs 30).
#
# Without --dry-run it starts the servers, waits for each to print
# `inferd ready`, and then stays in the foreground as their supervisor:
# SIGTERM/SIGINT is forwarded to every server (each drains, then exits 0); it
# exits when all have exited, non-zero if any failed. It does not restart a
# server that dies: run it under systemd (Restart=on-failure) or use
# docker-compose.yml beside this file for that.
#
# This script NEVER changes the MIG layout. An administrator creates it first
# (root, GPU idle; H100 80GB profile names shown; `nvidia-smi mig -lgip` lists
# the profiles of your GPU, e.g. 1g.18gb ... 7g.141gb on H200):
#   nvidia-smi -i 0 -mig 1                     # enable MIG mode on GPU 0 (may need a GPU reset or reboot)
#   nvidia-smi mig -i 0 -lgip                  # list GPU instance profiles
#   nvidia-smi mig -i 0 -cgi 1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb -C
#                                              # 7 GPU instances, each with its default compute instance (-C)
#   nvidia-smi mig -i 0 -cgi 3g.40gb,2g.20gb,2g.20gb -C     # or a mixed layout
#   nvidia-smi -L                              # the MIG UUIDs this script reads
# To undo: nvidia-smi mig -i 0 -dci && nvidia-smi mig -i 0 -dgi && nvidia-smi -i 0 -mig 0
# The layout does not survive a reboot unless the admin re-creates it (e.g.
# NVIDIA's mig-parted, or the GPU operator's MIG manager on Kubernetes).
#
# A MIG-enabled GPU on which no instance was created is listed by nvidia-smi -L
# as a plain GPU line; this script would then start a server on it that finds
# no usable CUDA device and serves on the CPU (its log says so).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=""
bin="$here/../../build/bin/inferd"
[ -x "$bin" ] || bin=inferd
base_grpc=8001
base_http=8000
host=127.0.0.1
upstreams_out=""
log_dir=./inferd-mig-logs
smi_output=""
dry_run=0
extra=()

die() { echo "inferd-mig.sh: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] || die "$1 needs a value"; }
is_port() { [[ "$1" =~ ^[0-9]{1,5}$ ]] && [ "$1" -ge 1 ] && [ "$1" -le 65535 ]; }

while [ $# -gt 0 ]; do
  case "$1" in
    --repo) need "$@"; repo=$2; shift 2 ;;
    --bin) need "$@"; bin=$2; shift 2 ;;
    --base-grpc-port) need "$@"; is_port "$2" || die "bad --base-grpc-port '$2'"; base_grpc=$2; shift 2 ;;
    --base-http-port) need "$@"; is_port "$2" || die "bad --base-http-port '$2'"; base_http=$2; shift 2 ;;
    --host) need "$@"; host=$2; shift 2 ;;
    --upstreams-out) need "$@"; upstreams_out=$2; shift 2 ;;
    --log-dir) need "$@"; log_dir=$2; shift 2 ;;
    --smi-output) need "$@"; smi_output=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$repo" ] || die "--repo DIR is required (the model repository every server loads)"
[[ "$host" =~ ^[A-Za-z0-9._:-]+$ ]] || die "bad --host '$host'"

# --- the device listing
if [ -n "$smi_output" ]; then
  [ -r "$smi_output" ] || die "cannot read --smi-output file: $smi_output"
  listing=$(cat "$smi_output")
else
  command -v nvidia-smi >/dev/null 2>&1 ||
    die "nvidia-smi not found (no NVIDIA driver here?); give --smi-output FILE to use a saved 'nvidia-smi -L'"
  # nvidia-smi exits non-zero when it finds no device; the parse below reports that case
  listing=$(nvidia-smi -L 2>&1) || true
fi

# --- parse: GPU lines, and the MIG lines indented under each
gpu_re='^GPU ([0-9]+): (.*) \(UUID: (GPU-[^)]+)\)[[:space:]]*$'
mig_re='^[[:space:]]+MIG ([^[:space:]]+)[[:space:]]+Device[[:space:]]+([0-9]+): \(UUID: (MIG-[^)]+)\)[[:space:]]*$'
slices=()   # "uuid|description"
gpu_idx="" gpu_uuid="" gpu_name="" gpu_migs=0
flush_gpu() {
  if [ -n "$gpu_uuid" ] && [ "$gpu_migs" -eq 0 ]; then
    slices+=("$gpu_uuid|GPU $gpu_idx ($gpu_name), whole GPU")
  fi
}
while IFS= read -r line || [ -n "$line" ]; do
  if [[ "$line" =~ $gpu_re ]]; then
    flush_gpu
    gpu_idx=${BASH_REMATCH[1]} gpu_name=${BASH_REMATCH[2]} gpu_uuid=${BASH_REMATCH[3]} gpu_migs=0
  elif [[ "$line" =~ $mig_re ]]; then
    [ -n "$gpu_uuid" ] || die "MIG line before any GPU line: '$line'"
    gpu_migs=$((gpu_migs + 1))
    slices+=("${BASH_REMATCH[3]}|GPU $gpu_idx ($gpu_name), MIG ${BASH_REMATCH[1]} device ${BASH_REMATCH[2]}")
  fi
done <<< "$listing"
flush_gpu

if [ ${#slices[@]} -eq 0 ]; then
  first=$(printf '%s\n' "$listing" | sed -n '1p')
  echo "inferd-mig.sh: no GPU or MIG device found in 'nvidia-smi -L' output${smi_output:+ ($smi_output)}:" \
       "${first:-<empty>}" >&2
  echo "inferd-mig.sh: check the driver (nvidia-smi), or run one CPU server: inferd --model-repository $repo" >&2
  exit 1
fi

# --- ports: gRPC BASE_GRPC+2k, HTTP BASE_HTTP+2k; every port distinct and valid
declare -A used=()
for k in "${!slices[@]}"; do
  for p in $((base_grpc + 2 * k)) $((base_http + 2 * k)); do
    [ "$p" -le 65535 ] || die "slice $k: port $p is above 65535 (lower the base ports)"
    [ -z "${used[$p]:-}" ] || die "port $p would be used twice: give --base-grpc-port and --base-http-port of different parity (e.g. 8001 and 8000)"
    used[$p]=1
  done
done

# --- the upstream list for deploy/lb/render.sh
if [ -n "$upstreams_out" ]; then
  {
    echo "# inferd-mig.sh: ${#slices[@]} server(s); GRPC_HOST:PORT HTTP_HOST:PORT (deploy/lb/render.sh --upstreams)"
    for k in "${!slices[@]}"; do
      echo "# $k: ${slices[$k]#*|} ${slices[$k]%%|*}"
      echo "$host:$((base_grpc + 2 * k)) $host:$((base_http + 2 * k))"
    done
  } > "$upstreams_out.tmp.$$"
  mv "$upstreams_out.tmp.$$" "$upstreams_out"
fi

command_for() {  # k -> the argv of slice k's server
  local k=$1
  cmd=("$bin" --model-repository "$repo" --grpc-port $((base_grpc + 2 * k)) --http-port $((base_http + 2 * k)) "${extra[@]}")
}

if [ "$dry_run" = 1 ]; then
  for k in "${!slices[@]}"; do
    command_for "$k"
    printf 'CUDA_VISIBLE_DEVICES=%q' "${slices[$k]%%|*}"
    printf ' %q' "${cmd[@]}"
    printf '\n'
  done
  exit 0
fi

# --- run and supervise
[ -x "$bin" ] || command -v "$bin" >/dev/null 2>&1 || die "inferd binary not found: $bin (give --bin PATH)"
[ -d "$repo" ] || die "model repository not found: $repo"
mkdir -p "$log_dir"
pids=()
# shellcheck disable=SC2317  # invoked by the trap
stop_all() {
  trap - TERM INT
  echo "inferd-mig.sh: stopping ${#pids[@]} server(s) (SIGTERM; each drains, then exits)" >&2
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
}
trap stop_all TERM INT
for k in "${!slices[@]}"; do
  command_for "$k"
  log="$log_dir/inferd-$k.log"
  echo "inferd-mig.sh: [$k] ${slices[$k]#*|} -> grpc $((base_grpc + 2 * k)) http $((base_http + 2 * k)), log $log" >&2
  CUDA_VISIBLE_DEVICES="${slices[$k]%%|*}" "${cmd[@]}" < /dev/null > "$log" 2>&1 &
  pids+=($!)
done
# wait for each `inferd ready` line (or its death)
for k in "${!pids[@]}"; do
  log="$log_dir/inferd-$k.log"
  for _ in $(seq 1 600); do
    grep -q '^inferd ready:' "$log" 2>/dev/null && break
    kill -0 "${pids[$k]}" 2>/dev/null || break
    sleep 0.1
  done
  if grep -q '^inferd ready:' "$log"; then
    echo "inferd-mig.sh: [$k] $(grep -m1 '^inferd ready:' "$log")" >&2
  else
    echo "inferd-mig.sh: [$k] did not become ready; tail of $log:" >&2
    tail -n 20 "$log" >&2 || true
  fi
done
status=0
for k in "${!pids[@]}"; do
  rc=0
  while :; do
    wait "${pids[$k]}" && rc=0 || rc=$?
    # a trapped signal interrupts wait with 128+n while the child still runs: wait again
    kill -0 "${pids[$k]}" 2>/dev/null || break
  done
  echo "inferd-mig.sh: [$k] exited with $rc" >&2
  [ "$rc" = 0 ] || status=1
done
exit $status
