"""tests/llm/write_ckpts.py: every fixture's checkpoint (tests/llm/fixtures)
rebuilt with numpy into OUTDIR/<fixture name>, for tests that load them
without the transformers reference (tests/gpu/test_gpu_llm_step.c).

    write_ckpts.py OUTDIR

Exit 77 without numpy; 1 when numpy draws other weights than the fixture
recorded (its digest), as check_llm_greedy.py says.
"""
import glob
import json
import os
import sys

try:
    import numpy  # noqa: F401
except ImportError:
    print("skipped: numpy is not installed (tests/requirements.txt)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llm_ckpt  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: write_ckpts.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    bad = 0
    for path in sorted(glob.glob(os.path.join(HERE, "fixtures", "*.json"))):
        fx = json.load(open(path))
        sha = llm_ckpt.write_checkpoint(fx, os.path.join(out, fx["name"]))
        if sha != fx["weights_sha256"]:
            print("%s: numpy drew other weights than the fixture's (digest %s)" % (fx["name"], sha[:12]))
            bad += 1
        else:
            print("wrote", os.path.join(out, fx["name"]))
    sys.exit(1 if bad else 0)


main()
