"""tests/llm/tok/check_tok_errors.py: the tokenizer's load errors. Broken or
unsupported tokenizer.json files (made from the committed fixtures with the
json module alone, so this runs without `tokenizers`) must fail to load with
one message that names every problem, and nothing else may crash.

    check_tok_errors.py INFERD_TOK_RUN WORKDIR
"""
import copy
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def load(runner, work, name, tok, raw=None):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(raw if raw is not None else json.dumps(tok))
    p = subprocess.run([runner, "load", d], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def expect(runner, work, name, tok, needles, raw=None):
    rc, out = load(runner, work, name, tok, raw)
    missing = [n for n in needles if n not in out]
    if rc != 1 or missing:
        failures.append(f"{name}: exit {rc}, missing {missing} in: {out.strip()}")
        print(f"FAIL {name}: exit {rc}, missing {missing}\n  {out.strip()}")
    else:
        print(f"ok   {name}: {out.strip()[:300]}")


def main():
    runner, work = sys.argv[1], sys.argv[2]
    base = json.load(open(os.path.join(HERE, "fixtures", "llama3", "tokenizer.json"), encoding="utf-8"))
    spm = json.load(open(os.path.join(HERE, "fixtures", "llama2", "tokenizer.json"), encoding="utf-8"))

    rc, out = load(runner, work, "good", base)
    if rc != 0 or not out.startswith("ok"):
        failures.append(f"good: exit {rc}: {out}")

    t = copy.deepcopy(base)
    t["model"]["type"] = "Unigram"
    t["normalizer"] = {"type": "Lowercase"}
    t["pre_tokenizer"]["pretokenizers"].append({"type": "Whitespace"})
    t["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": True}
    t["post_processor"] = {"type": "BertProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]}
    t["truncation"] = {"max_length": 8, "strategy": "LongestFirst", "stride": 0, "direction": "Right"}
    expect(runner, work, "every_type_at_once", t,
           ["6 problems", "model type 'Unigram'", "normalizer type 'Lowercase'",
            "pre_tokenizer type 'Whitespace'", "decoder type 'WordPiece'", "post_processor type 'BertProcessing'",
            "truncation"])

    t = copy.deepcopy(base)
    t["model"]["dropout"] = 0.1
    t["model"]["foo"] = 1
    t["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Weird"
    t["pre_tokenizer"]["pretokenizers"][1]["bogus"] = True
    t["padding"] = {"strategy": "BatchLongest"}
    expect(runner, work, "fields", t, ["model BPE.dropout", "field 'foo'", "behavior 'Weird'",
                                       "pre_tokenizer ByteLevel: field 'bogus'", "padding"])

    t = copy.deepcopy(spm)
    t["decoder"]["decoders"][3] = {"type": "Strip", "content": "ab", "start": 1, "stop": 0}
    t["normalizer"]["normalizers"][0] = {"type": "Prepend"}
    expect(runner, work, "values", t, ["decoder Strip.content must be one character", "normalizer Prepend.prepend is missing"])

    t = copy.deepcopy(base)
    t["model"]["merges"] = [["zzz", "Ġ"]] + t["model"]["merges"]
    vocab = t["model"]["vocab"]
    a, b = list(vocab)[5:7]
    vocab[b] = vocab[a]
    expect(runner, work, "vocab_and_merges", t, ["model.merges[0]: 'zzz' is not in the vocabulary",
                                                 f"is given to both"])

    t = copy.deepcopy(base)
    t["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": "(?<oops"}
    expect(runner, work, "regex", t, ["does not compile with PCRE2"])

    t = copy.deepcopy(base)
    t["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": "[^\\S\\n]+"}
    expect(runner, work, "negated_shorthand_in_class", t, ["negated class shorthand"])

    t = copy.deepcopy(base)
    t["post_processor"]["processors"][1]["single"].append({"Sequence": {"id": "B", "type_id": 1}})
    expect(runner, work, "template", t, ["names sequence 'B'"])

    expect(runner, work, "not_json", None, ["is not valid JSON"], raw="{\"model\": ")
    expect(runner, work, "no_model", {"version": "1.0"}, ["model is missing"])

    rc, out = subprocess.run([runner, "load", os.path.join(work, "does_not_exist")], capture_output=True,
                             text=True).returncode, None
    if rc != 1:
        failures.append(f"missing directory: exit {rc}")

    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
