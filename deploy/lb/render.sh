#!/bin/sh
# Renders deploy/lb/nginx.conf.template into a complete nginx.conf for a pool
# of inferd servers. POSIX sh + awk only, so it also runs inside the stock
# nginx image (deploy/mig/docker-compose.yml does that).
#
#   render.sh [--template FILE] [--upstreams FILE] [--grpc HOST:PORT]...
#             [--http HOST:PORT]... [--down HOST:PORT]... [--listen-grpc 8001]
#             [--listen-http 8000] [--listen-addr 0.0.0.0] [--run-dir DIR]
#             [--max-fails 1] [--fail-timeout 10s] [--out FILE]
#             [--tls-cert FILE --tls-key FILE]
#             [--upstream-ca FILE --upstream-name NAME
#              [--upstream-cert FILE --upstream-key FILE]]
#
# --upstreams FILE: one server per line, "GRPC_HOST:PORT [HTTP_HOST:PORT]"
#   ('#' comments and blank lines ignored), as deploy/mig/inferd-mig.sh
#   --upstreams-out writes it. --grpc/--http add servers one by one.
# --down HOST:PORT: keep that server in the file but marked `down` (no new
#   calls): render, `nginx -s reload`, then SIGTERM that inferd, and no
#   client sees its drain.
# --run-dir: pid file, logs and temp files (created; default /tmp/inferd-lb).
# --out: the nginx.conf to write (default: stdout).
# --tls-cert/--tls-key: TLS on the gRPC listener with this PEM certificate
#   (chain) and key (nginx terminates the clients' TLS).
# --upstream-ca: TLS from nginx to the servers (grpcs), verified against this
#   CA for --upstream-name (a name every server's certificate holds);
#   --upstream-cert/--upstream-key: nginx's client certificate for servers
#   run with --grpc-use-ssl-mutual. Paths: absolute, as nginx reads them.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
template="$here/nginx.conf.template"
upstreams=""
grpc_list=""
http_list=""
down_list=" "
listen_grpc=8001
listen_http=8000
listen_addr=0.0.0.0
run_dir=/tmp/inferd-lb
max_fails=1
fail_timeout=10s
out=""
tls_cert=""
tls_key=""
up_ca=""
up_name=""
up_cert=""
up_key=""

die() { echo "render.sh: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] || die "$1 needs a value"; }
check_hostport() {
  printf '%s\n' "$1" | grep -Eq '^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}$' ||
    die "not HOST:PORT: '$1'"
}
# nginx.conf has no quoting we rely on: a path is absolute and plain
check_path() {
  case "$2" in /*) ;; *) die "$1: an absolute path is wanted, got '$2'" ;; esac
  case "$2" in *[!A-Za-z0-9._/-]*) die "$1: '$2' (letters, digits, . _ / - only)" ;; esac
}
check_port() {
  if ! printf '%s\n' "$2" | grep -Eq '^[0-9]{1,5}$' || [ "$2" -lt 1 ] || [ "$2" -gt 65535 ]; then
    die "$1: not a port: '$2'"
  fi
}

while [ $# -gt 0 ]; do
  case "$1" in
    --template) need "$@"; template=$2; shift 2 ;;
    --upstreams) need "$@"; upstreams=$2; shift 2 ;;
    --grpc) need "$@"; check_hostport "$2"; grpc_list="$grpc_list $2"; shift 2 ;;
    --http) need "$@"; check_hostport "$2"; http_list="$http_list $2"; shift 2 ;;
    --down) need "$@"; check_hostport "$2"; down_list="$down_list$2 "; shift 2 ;;
    --listen-grpc) need "$@"; check_port "$1" "$2"; listen_grpc=$2; shift 2 ;;
    --listen-http) need "$@"; check_port "$1" "$2"; listen_http=$2; shift 2 ;;
    --listen-addr) need "$@"; listen_addr=$2; shift 2 ;;
    --run-dir) need "$@"; run_dir=$2; shift 2 ;;
    --max-fails) need "$@"; max_fails=$2; shift 2 ;;
    --fail-timeout) need "$@"; fail_timeout=$2; shift 2 ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --tls-cert) need "$@"; check_path "$1" "$2"; tls_cert=$2; shift 2 ;;
    --tls-key) need "$@"; check_path "$1" "$2"; tls_key=$2; shift 2 ;;
    --upstream-ca) need "$@"; check_path "$1" "$2"; up_ca=$2; shift 2 ;;
    --upstream-cert) need "$@"; check_path "$1" "$2"; up_cert=$2; shift 2 ;;
    --upstream-key) need "$@"; check_path "$1" "$2"; up_key=$2; shift 2 ;;
    --upstream-name) need "$@"; up_name=$2; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

[ -r "$template" ] || die "template not readable: $template"
printf '%s\n' "$listen_addr" | grep -Eq '^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._*-]+)$' || die "bad --listen-addr '$listen_addr'"
printf '%s\n' "$max_fails" | grep -Eq '^[0-9]+$' || die "bad --max-fails '$max_fails'"
printf '%s\n' "$fail_timeout" | grep -Eq '^[0-9]+(ms|s|m)?$' || die "bad --fail-timeout '$fail_timeout'"
case "$run_dir" in *[!A-Za-z0-9._/-]*|"") die "bad --run-dir '$run_dir' (letters, digits, . _ / - only)" ;; esac

if [ -n "$upstreams" ]; then
  [ -r "$upstreams" ] || die "upstreams file not readable: $upstreams"
  # shellcheck disable=SC2016
  while read -r g h rest; do
    case "$g" in ''|'#'*) continue ;; esac
    [ -z "${rest:-}" ] || case "$rest" in '#'*) ;; *) die "$upstreams: extra fields after '$g ${h:-}'" ;; esac
    check_hostport "$g"; grpc_list="$grpc_list $g"
    case "${h:-}" in ''|'#'*) ;; *) check_hostport "$h"; http_list="$http_list $h" ;; esac
  done < "$upstreams"
fi
if [ -n "$tls_cert$tls_key" ] && { [ -z "$tls_cert" ] || [ -z "$tls_key" ]; }; then
  die "--tls-cert and --tls-key go together"
fi
if [ -n "$up_cert$up_key" ] && { [ -z "$up_cert" ] || [ -z "$up_key" ]; }; then
  die "--upstream-cert and --upstream-key go together"
fi
[ -z "$up_cert" ] || [ -n "$up_ca" ] ||
  die "--upstream-cert needs --upstream-ca (a client certificate only makes sense over TLS)"
[ -z "$up_ca" ] || [ -n "$up_name" ] ||
  die "--upstream-ca needs --upstream-name NAME (the name in the servers' certificates)"
[ -z "$up_name" ] || [ -n "$up_ca" ] || die "--upstream-name needs --upstream-ca"
[ -z "$up_name" ] || printf '%s\n' "$up_name" | grep -Eq '^[A-Za-z0-9.-]+$' || die "bad --upstream-name '$up_name'"
[ -n "$grpc_list" ] || die "no gRPC servers (give --upstreams FILE or --grpc HOST:PORT)"
[ -n "$http_list" ] || die "no HTTP servers (give HTTP_HOST:PORT in the upstreams file or --http HOST:PORT)"

server_lines() {
  for s in $1; do
    flags="max_fails=$max_fails fail_timeout=$fail_timeout"
    case "$down_list" in *" $s "*) flags="$flags down" ;; esac
    printf '        server %s %s;\n' "$s" "$flags"
  done
}
grpc_servers=$(server_lines "$grpc_list")
http_servers=$(server_lines "$http_list")

# The TLS blocks (empty lines when off): whole-line markers in the template.
grpc_listen_flags=http2
grpc_listen_tls=""
if [ -n "$tls_cert" ]; then
  grpc_listen_flags="ssl http2"
  grpc_listen_tls="        ssl_certificate $tls_cert;
        ssl_certificate_key $tls_key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:inferd_tls:10m;"
fi
grpc_scheme=grpc
grpc_upstream_tls=""
if [ -n "$up_ca" ]; then
  grpc_scheme=grpcs
  grpc_upstream_tls="            # TLS to the servers: verified against the CA, for this name
            grpc_ssl_trusted_certificate $up_ca;
            grpc_ssl_verify on;
            grpc_ssl_verify_depth 4;
            grpc_ssl_name $up_name;
            grpc_ssl_server_name on;
            grpc_ssl_protocols TLSv1.2 TLSv1.3;
            grpc_ssl_session_reuse on;"
  if [ -n "$up_cert" ]; then
    grpc_upstream_tls="$grpc_upstream_tls
            # nginx's client certificate (servers with --grpc-use-ssl-mutual)
            grpc_ssl_certificate $up_cert;
            grpc_ssl_certificate_key $up_key;"
  fi
fi

mkdir -p "$run_dir"
tmp="${out:-/dev/stdout}"
[ -z "$out" ] || tmp="$out.tmp.$$"
GRPC_SERVERS="$grpc_servers" HTTP_SERVERS="$http_servers" GRPC_LISTEN_TLS="$grpc_listen_tls" \
GRPC_UPSTREAM_TLS="$grpc_upstream_tls" awk \
  -v lg="$listen_grpc" -v lh="$listen_http" -v la="$listen_addr" -v rd="$run_dir" \
  -v glf="$grpc_listen_flags" -v gs="$grpc_scheme" '
  /^@@GRPC_SERVERS@@$/ { print ENVIRON["GRPC_SERVERS"]; next }
  /^@@HTTP_SERVERS@@$/ { print ENVIRON["HTTP_SERVERS"]; next }
  /^@@GRPC_LISTEN_TLS@@$/ { if (ENVIRON["GRPC_LISTEN_TLS"] != "") print ENVIRON["GRPC_LISTEN_TLS"]; next }
  /^@@GRPC_UPSTREAM_TLS@@$/ { if (ENVIRON["GRPC_UPSTREAM_TLS"] != "") print ENVIRON["GRPC_UPSTREAM_TLS"]; next }
  { gsub(/@@LISTEN_GRPC@@/, lg); gsub(/@@LISTEN_HTTP@@/, lh); gsub(/@@LISTEN_ADDR@@/, la); gsub(/@@RUN_DIR@@/, rd)
    gsub(/@@GRPC_LISTEN_FLAGS@@/, glf); gsub(/@@GRPC_SCHEME@@/, gs)
    if ($0 ~ /@@[A-Z_]+@@/) { print "render.sh: unknown marker in template: " $0 > "/dev/stderr"; exit 3 }
    print }' "$template" > "$tmp" || { [ -z "$out" ] || rm -f "$tmp"; exit 3; }
[ -z "$out" ] || mv "$tmp" "$out"
