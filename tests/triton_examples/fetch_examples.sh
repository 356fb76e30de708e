#!/usr/bin/env bash
# Puts Triton's Python client examples (src/python/examples of triton-inference-server/client at the
# pinned commit) into tests/triton_examples/.cache/examples, for run_examples.py.
#
# Why fetched, not vendored: they are Triton's code (Apache-2.0), not ours to copy into the tree;
# .cache/ is git-ignored. Source, in order:
#   $TRITON_CLIENT_GIT  a git directory holding the pinned commit (a bare mirror will do);
#   $TRITON_CLIENT_MIRROR (default /work/.mirror/triton-inference-server+client/repo), when it exists;
#   git clone https://github.com/triton-inference-server/client (needs GitHub: CI has none).
# Exit 0 when the examples are in place, 77 (the "skip" status of automake and ctest) when no
# source can give them, so callers skip instead of failing.
set -euo pipefail

PIN=58a44caa0dce77303115302e6dbdf64626b2b093   # "fix: Reject Triton reserved parameter keys in Python client (#894)"
URL=https://github.com/triton-inference-server/client
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=$HERE/.cache
DEST=$CACHE/examples
STAMP=$DEST/.pinned

if [[ -f $STAMP && $(cat "$STAMP") == "$PIN" ]]; then
  echo "triton examples: $DEST (commit ${PIN:0:8}, cached)"
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
  mv "$tmp/src/python/examples" "$DEST"
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
