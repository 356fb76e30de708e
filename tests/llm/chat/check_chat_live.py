#!/usr/bin/env python3
"""Live check of engine/llm/chat_template.c against the installed transformers.

Renders every template in templates/ with the cases of chat_cases.py plus
random conversations (seeded) through transformers' apply_chat_template and
through `inferd-chat-render render`, and compares: the same text, or both
failing (with raise_exception's message exactly). Exit 77 (ctest: skipped)
when transformers, jinja2 or tokenizers cannot be imported: CI's venv does
not install them; the committed fixtures (ctest chat_templates) cover CI.

usage: check_chat_live.py PATH/TO/inferd-chat-render [N_RANDOM_PER_TEMPLATE] [--extra-dir DIR]

--extra-dir DIR also renders every DIR/*.jinja (e.g. llama.cpp's
models/templates/) with placeholder special tokens; a template both sides
refuse to compile counts as agreeing.
"""
import copy
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chat_cases  # noqa: E402


def random_cases(rng, n):
    pool = [chat_cases.SYS, chat_cases.U1, chat_cases.A1, chat_cases.U2, chat_cases.A2, chat_cases.UNICODE,
            chat_cases.CALL, chat_cases.RESULT, chat_cases.FINAL, chat_cases.THINK, chat_cases.REASONED,
            chat_cases.PARTS, chat_cases.CALL_WITH_TEXT]
    out = []
    for i in range(n):
        msgs = [copy.deepcopy(rng.choice(pool)) for _ in range(rng.randint(1, 6))]
        # Mostly well-formed: alternate user and assistant after an optional system message.
        if rng.random() < 0.6:
            msgs = ([chat_cases.SYS] if rng.random() < 0.5 else []) + [
                copy.deepcopy(chat_cases.U1 if k % 2 == 0 else chat_cases.A1) for k in range(rng.randint(1, 5))]
        case = {"name": f"random {i}", "messages": msgs, "add_generation_prompt": rng.random() < 0.5,
                "now": chat_cases.NOW + rng.randint(0, 10 ** 8)}
        if rng.random() < 0.3:
            case["tools"] = [chat_cases.WEATHER_TOOL]
        out.append(case)
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    try:
        import jinja2  # noqa: F401
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e} (pip install transformers jinja2 to run the live check)")
        return 77
    import make_chat_fixtures as mk

    mk.pinned_clock()
    args = sys.argv[1:]
    extra_dir = None
    if "--extra-dir" in args:
        k = args.index("--extra-dir")
        extra_dir = args[k + 1]
        del args[k:k + 2]
    driver = args[0]
    n_random = int(args[1]) if len(args) > 1 else 20
    rng = random.Random(36)
    passed = failed = 0
    templates = [(os.path.join(HERE, "templates", name), bos, eos) for name, (bos, eos) in chat_cases.TEMPLATES.items()]
    if extra_dir:
        import glob

        from transformers.utils.chat_template_utils import _compile_jinja_template
        for path in sorted(glob.glob(os.path.join(extra_dir, "*.jinja"))):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            try:
                _compile_jinja_template(text)
            except Exception as e:
                p = subprocess.run([driver, "parse", path], capture_output=True)
                ok = p.returncode != 0
                passed, failed = passed + ok, failed + (not ok)
                print(f"{'both refuse' if ok else 'FAIL: only transformers refuses'} {os.path.basename(path)}: {e}")
                continue
            templates.append((path, "<s>", "</s>"))
    for path, bos, eos in templates:
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            template = f.read()
        tok = mk.tokenizer(bos, eos)
        for case in chat_cases.cases() + random_cases(rng, n_random):
            import datetime

            # The pinned clock follows each case's own time.
            import transformers.utils.chat_template_utils as ctu
            now = case["now"]

            class At(datetime.datetime):
                @classmethod
                def now(cls, tz=None):
                    return datetime.datetime.fromtimestamp(now, datetime.timezone.utc).replace(tzinfo=None)

            ctu.datetime = At
            want = mk.render(tok, template, case)
            req = dict(case, bos_token=bos, eos_token=eos)
            p = subprocess.run([driver, "render", path], input=json.dumps(req).encode(), capture_output=True, timeout=30)
            if p.returncode != 0:
                print(f"FAIL {name} / {case['name']}: the driver exited {p.returncode}: {p.stderr.decode()[-500:]}")
                failed += 1
                continue
            got = json.loads(p.stdout)
            if "output" in want:
                ok = got.get("output") == want["output"]
            else:
                ok = "error" in got and (want["error"]["kind"] != "raise_exception" or
                                         (got.get("code") == "FAILED_PRECONDITION" and got["error"] == want["error"]["message"]))
            if ok:
                passed += 1
            else:
                failed += 1
                print(f"FAIL {name} / {case['name']}\n  want {json.dumps(want, ensure_ascii=False)[:400]}\n"
                      f"  got  {json.dumps(got, ensure_ascii=False)[:400]}")
    print(f"live check against transformers {transformers.__version__}: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
