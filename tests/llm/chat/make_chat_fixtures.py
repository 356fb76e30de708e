#!/usr/bin/env python3
"""Records transformers' apply_chat_template on every chat template in
templates/ for every conversation in chat_cases.py into fixtures/<template>.json
(committed; tests/llm/chat/chat_render.c compares engine/llm/chat_template.c
with them byte for byte in ctest chat_templates).

Needs transformers and jinja2 (not torch): pip install transformers jinja2.
The tokenizer is a one-word WordLevel tokenizer built offline: only its
special tokens matter to apply_chat_template(tokenize=False).
strftime_now's clock is pinned to chat_cases.NOW so the fixtures do not
depend on the day they were made.
"""
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chat_cases  # noqa: E402


def pinned_clock():
    import transformers.utils.chat_template_utils as ctu

    class FixedDatetime(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.fromtimestamp(chat_cases.NOW, datetime.timezone.utc).replace(tzinfo=None)

    ctu.datetime = FixedDatetime


def tokenizer(bos, eos):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    kw = {}
    if bos is not None:
        kw["bos_token"] = bos
    if eos is not None:
        kw["eos_token"] = eos
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")), **kw)


def render(tok, template, case):
    """What apply_chat_template makes of case: {"output": text} or {"error": {kind, type, message}}."""
    import copy

    import jinja2

    kwargs = dict(case.get("extra") or {})
    try:
        out = tok.apply_chat_template(
            copy.deepcopy(case["messages"]),
            chat_template=template,
            tools=copy.deepcopy(case.get("tools")),
            documents=copy.deepcopy(case.get("documents")),
            add_generation_prompt=case["add_generation_prompt"],
            continue_final_message=case.get("continue_final_message", False),
            tokenize=False,
            **kwargs,
        )
        return {"output": out}
    except jinja2.exceptions.TemplateError as e:
        # raise_exception raises TemplateError itself; Jinja's own errors are subclasses.
        kind = "raise_exception" if type(e) is jinja2.exceptions.TemplateError else "template"
        return {"error": {"kind": kind, "type": type(e).__name__, "message": str(e)}}
    except Exception as e:  # TypeError, ValueError...: the C side must fail too
        return {"error": {"kind": "python", "type": type(e).__name__, "message": str(e)}}


def main():
    import transformers

    pinned_clock()
    out_dir = os.path.join(HERE, "fixtures")
    os.makedirs(out_dir, exist_ok=True)
    for name, (bos, eos) in chat_cases.TEMPLATES.items():
        with open(os.path.join(HERE, "templates", name), encoding="utf-8") as f:
            template = f.read()
        tok = tokenizer(bos, eos)
        cases = []
        for case in chat_cases.cases():
            c = dict(case)
            c.update(render(tok, template, case))
            cases.append(c)
        fx = {"template": name, "bos_token": bos, "eos_token": eos,
              "made_with": {"transformers": transformers.__version__, "jinja2": __import__("jinja2").__version__},
              "cases": cases}
        path = os.path.join(out_dir, name.replace(".jinja", ".json"))
        with open(path, "w", encoding="utf-8") as f:
            json.dump(fx, f, ensure_ascii=False, indent=1)
            f.write("\n")
        n_err = sum("error" in c for c in cases)
        print(f"{name}: {len(cases)} cases ({n_err} errors)")


if __name__ == "__main__":
    main()
