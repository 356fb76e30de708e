#!/usr/bin/env python3
"""No two source files call each other, directly or around a circle (issue 30).

Reads the object files of a build: file A depends on file B when A's object
uses a symbol B's object defines. Prints every strongly connected component of
more than one file, with the calls that close it, and exits 1 if there is one.

    check_circles.py BUILD_DIR SOURCE_DIR [FOLDER ...]

FOLDER: the source folders to check (default: engine server batcher kernels proto clients).
Objects whose source no longer exists (a stale build) are skipped.
"""
import collections
import os
import re
import subprocess
import sys


def objects(build, src_root, folders):
    """(source path relative to src_root, object path) for every object of the given folders."""
    pat = re.compile(r"^(.*?)/?CMakeFiles/[^/]+\.dir/(.*)\.o$")
    for d, _, files in os.walk(build):
        for f in files:
            if not f.endswith(".o"):
                continue
            full = os.path.join(d, f)
            m = pat.match(os.path.relpath(full, build))
            if not m:
                continue
            # CMake writes a source outside its target's folder with "__" for ".."
            rel = os.path.normpath(os.path.join(m.group(1), m.group(2).replace("__/", "../")))
            if rel.split(os.sep)[0] in folders and os.path.exists(os.path.join(src_root, rel)):
                yield rel, full


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    build, src_root = sys.argv[1], sys.argv[2]
    folders = set(sys.argv[3:] or ["engine", "server", "batcher", "kernels", "proto", "clients"])
    defs, uses, files = {}, collections.defaultdict(set), set()
    for rel, obj in objects(build, src_root, folders):
        files.add(rel)
        for line in subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in "TDBR":
                defs.setdefault(p[2], rel)
            elif len(p) == 2 and p[0] == "U":
                uses[rel].add(p[1])
    if not files:
        print("check_circles: no object files of %s under %s" % (sorted(folders), build), file=sys.stderr)
        return 2
    calls = collections.defaultdict(set)  # file -> {(callee file, symbol)}
    for f in files:
        for u in uses[f]:
            d = defs.get(u)
            if d and d != f:
                calls[f].add((d, u))
    # Tarjan's strongly connected components, iteratively
    index, low, on, stack, comps, n = {}, {}, set(), [], [], 0
    for root in sorted(files):
        if root in index:
            continue
        work = [(root, iter(sorted({d for d, _ in calls[root]})))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted({d for d, _ in calls[w]}))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    for c in comps:
        print("circle: " + " ".join(c))
        for f in c:
            for d, sym in sorted(calls[f]):
                if d in c:
                    print("   %s -> %s (%s)" % (f, d, sym))
    print("%d circles among %d files" % (len(comps), len(files)))
    return 1 if comps else 0


if __name__ == "__main__":
    sys.exit(main())
