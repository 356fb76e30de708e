#!/usr/bin/env bash
# Sourced by run.sh and pa_echo.sh: est_conns PORT prints how many TCP connections to PORT are
# established now, read from /proc/net/tcp and tcp6 (the GPU machine has no `ss`: its tables
# printed "? connections"). Counted from the clients' side: remote port PORT, state 01.
est_conns() {
  awk -v p="$(printf '%04X' "$1")" \
    'FNR > 1 && $4 == "01" { n1 = split($3, a, ":"); if (a[n1] == p) n++ } END { print n + 0 }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null || echo 0
}
