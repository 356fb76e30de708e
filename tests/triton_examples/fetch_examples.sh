#!/usr/bin/env bash
# Refreshes tests/triton_examples/vendor/: Triton's Python client examples (src/python/examples of
# triton-inference-server/client at the pinned commit, unmodified) and that repository's LICENSE.
#
# Why vendored: issue 33 asks that CI run them, and CI reaches Debian and PyPI only (no GitHub).
# They are NVIDIA's, under the BSD-3-Clause licence their headers and vendor/LICENSE carry, which
# allows redistribution with the notices kept; nothing in them is changed. Run this script only to
# move the pin. Source, in order:
#   $TRITON_CLIENT_GIT  a git directory holding the pinned commit (a bare mirror will do);
#   $TRITON_CLIENT_MIRROR (default /work/.mirror/triton-inference-server+client/repo), when it exists;
#   git clone https://github.com/triton-inference-server/client.
# Exit 0 when the examples are in place, 77 (the "skip" status of automake and ctest) when no
# source can give them.
set -euo pipefail

PIN=58a44caa0dce77303115302e6dbdf64626b2b093   # "fix: Reject Triton reserved parameter keys in Python client (#894)"
URL=https://github.com/triton-inference-server/client
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=$HERE/.cache
DEST=$HERE/vendor
STAMP=$DEST/.pinned

if [[ -f $STAMP && $(cat "$STAMP") == "$PIN" ]]; then
  echo "triton examples: $DEST (commit ${PIN:0:8}, vendored)"
  exit 0
fi

# Extracts src/python/examples of $PIN from git directory $1 into $DEST; fails quietly.
extract() {
  local gitdir=$1 tmp
  git --git-dir="$gitdir" cat-file -e "$PIN^{commit}" 2>/dev/null || return 1
  tmp=$(mktemp -d "$CACHE/extract.XXXXXX")
  if ! git --git-dir="$gitdir" archive "$PIN" src/python/examples | tar -x -C "$tmp"; then
    rm -rf "$tmp"; return 1
  fi
  rm -rf "$DEST"
  mkdir -p "$DEST"
  cp "$tmp"/src/python/examples/*.py "$DEST"/
  git --git-dir="$gitdir" show "$PIN:LICENSE" > "$DEST/LICENSE"
  rm -rf "$tmp"
  echo "$PIN" > "$STAMP"
}

mkdir -p "$CACHE"
MIRROR=${TRITON_CLIENT_MIRROR-/work/.mirror/triton-inference-server+client/repo}
for gitdir in "${TRITON_CLIENT_GIT:-}" "$MIRROR"; do
  [[ -n $gitdir && -d $gitdir ]] || continue
  # A work tree's path works too: use its .git.
  [[ -d $gitdir/.git ]] && gitdir=$gitdir/.git
  if extract "$gitdir"; then
    echo "triton examples: $DEST (commit ${PIN:0:8}, from $gitdir)"
    exit 0
  fi
done

clone=$CACHE/client.git
if [[ ! -d $clone ]]; then
  # A blobless partial clone: the history is small, the blobs come for the one commit archived.
  if ! GIT_TERMINAL_PROMPT=0 timeout 120 git clone --quiet --bare --filter=blob:none "$URL" "$clone" 2>/dev/null; then
    rm -rf "$clone"
    echo "triton examples unavailable: no \$TRITON_CLIENT_GIT, no mirror, and $URL cannot be cloned (no GitHub access?)"
    exit 77
  fi
fi
if extract "$clone"; then
  echo "triton examples: $DEST (commit ${PIN:0:8}, cloned from $URL)"
  exit 0
fi
echo "triton examples unavailable: commit ${PIN:0:8} not found in the clone of $URL"
exit 77
