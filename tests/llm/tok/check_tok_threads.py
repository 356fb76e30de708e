"""tests/llm/tok/check_tok_threads.py: one tokenizer, four threads. For every
fixture family, inferd-tok-run's threads mode encodes and decodes 1,000 of
tok_corpus's strings on four threads at once over one eng_tok and compares
each answer with the one-thread answer. Needs no `tokenizers`, so it also
runs in the ThreadSanitizer build (tests/run.sh), where a data race fails it.

    check_tok_threads.py INFERD_TOK_RUN
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tok_corpus  # noqa: E402

FAMILIES = sorted(os.listdir(os.path.join(HERE, "fixtures")))


def main():
    runner = sys.argv[1]
    lines = "\n".join(json.dumps(s, ensure_ascii=False) for s in tok_corpus.make_corpus(99, 1000)) + "\n"
    bad = 0
    for fam in FAMILIES:
        p = subprocess.run([runner, "threads", os.path.join(HERE, "fixtures", fam)], input=lines, capture_output=True,
                           text=True, encoding="utf-8", timeout=600)
        ok = p.returncode == 0 and p.stdout.startswith("ok")
        bad += not ok
        print(f"{fam}: {'ok' if ok else 'FAIL'} {p.stdout.strip()} {p.stderr.strip()[-2000:]}")
    print(f"{len(FAMILIES)} families: {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
