"""tests/llm/tok/check_tokenizers.py: inferd's tokenizer (engine/llm/tokenizer*)
against the `tokenizers` library, family by family (tests/llm/tok/fixtures/,
made by make_tokenizers.py), over tok_corpus's 10,000 strings (a seed of its
own, not the one the vocabularies were trained on):

  encode   ids equal, with and without the template (add_special_tokens);
  decode   text equal, with and without skip_special_tokens, for every
           string's ids and for 1,000 random id sequences per family (special
           tokens, lone <0xXX> bytes and partial byte-level characters in the
           middle: broken UTF-8 the decoders must replace as tokenizers does);
  stream   the driver checks every delta is valid UTF-8 and that they add up
           to the decode; here the deltas of the first 1,500 sequences are
           also compared step by step with tokenizers' DecodeStream (where
           it adds up to the decode, and no <0xXX> byte token is involved:
           inferd holds a byte-fallback run back until it is closed, since
           a later byte can turn the run's valid bytes into U+FFFD).

    check_tokenizers.py INFERD_TOK_RUN WORKDIR [FAMILY...]

Exit 77 (skipped) without `tokenizers` (tests/requirements.txt).
"""
import json
import os
import random
import subprocess
import sys
import time

try:
    from tokenizers import Tokenizer
    from tokenizers.decoders import DecodeStream
except ImportError:
    print("skipped: the tokenizers package is not installed (tests/requirements.txt)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tok_corpus  # noqa: E402
from make_tokenizers import FAMILIES  # noqa: E402

N_STRINGS = 10000
N_RANDOM = 1000
N_STREAM_CMP = 1500
SHOW = 8
# beside the corpus (which also trained the fixtures): case folding in the
# contraction groups ((?i:'s...) matches the long s U+017F and the Kelvin sign)
EXTRA = ["it'\u017f ok", "I'\u212a x", "we'LL '\u0130", "'S'T'RE", "\u212a\u017f\u0131"]


def run(runner, mode, tokdir, lines):
    p = subprocess.run([runner, mode, tokdir], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       encoding="utf-8", errors="replace", timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{mode} {tokdir}: exit {p.returncode}: {p.stdout[-2000:]} {p.stderr[-2000:]}")
    # lines end at \n alone: str.splitlines would also split at U+2028, U+0085...
    out = [json.loads(x) for x in p.stdout.split("\n") if x]
    if len(out) != len(lines):
        raise RuntimeError(f"{mode} {tokdir}: {len(out)} answers for {len(lines)} lines")
    return out


def stream_deltas(tok, ids, skip):
    ds = DecodeStream(skip_special_tokens=skip)
    out = []
    for i in ids:
        r = ds.step(tok, i)
        out.append(r or "")
    return out


def check_family(runner, fam, corpus, rng):
    tokdir = os.path.join(HERE, "fixtures", fam)
    tok = Tokenizer.from_file(os.path.join(tokdir, "tokenizer.json"))
    bad = []
    t0 = time.monotonic()
    # one encode, the template applied after (what encode(add_special_tokens=True) does): the
    # oracle's encoding is most of this test's time
    enc = tok.encode_batch(corpus, add_special_tokens=False)
    want_n = [e.ids for e in enc]
    want_a = [tok.post_process(e, add_special_tokens=True).ids for e in enc]
    got = run(runner, "encode", tokdir, [json.dumps(s, ensure_ascii=False) for s in corpus])
    for s, wa, wn, g in zip(corpus, want_a, want_n, got):
        if "error" in g or g["a"] != wa or g["n"] != wn:
            bad.append(f"encode {s!r}: want {wa} / {wn}, got {g}")
    n_enc = len(corpus)
    # decode: every string's ids, and random sequences over the whole vocabulary
    seqs = [list(w) for w in want_a]
    size = tok.get_vocab_size(with_added_tokens=True)
    special_ids = [tok.token_to_id(a.content) for a in tok.get_added_tokens_decoder().values()]
    for _ in range(N_RANDOM):
        n = rng.randint(0, 24)
        seqs.append([rng.choice(special_ids) if rng.random() < 0.1 else rng.randrange(size) for _ in range(n)])
    got = run(runner, "decode", tokdir, [json.dumps(s) for s in seqs])
    n_stream_cmp = 0
    # <0xXX> tokens: inferd's stream holds a byte-fallback run back until it
    # is closed (DecodeStream emits it at once, and may then have to take it
    # back), so step-by-step deltas differ there by design
    byte_ids = {i for t, i in tok.get_vocab().items() if len(t) == 6 and t.startswith("<0x") and t.endswith(">")}
    for k, (ids, g) in enumerate(zip(seqs, got)):
        for skip, key in ((False, "d"), (True, "ds")):
            want = tok.decode(ids, skip_special_tokens=skip)
            if g.get(key) != want:
                bad.append(f"decode skip={skip} {ids}: want {want!r}, got {g.get(key)!r}")
        if "bad" in g:
            bad.append(f"stream {ids}: {g['bad']}")
        if (k < N_STREAM_CMP or k >= len(corpus)) and not any(i in byte_ids for i in ids):
            for skip, key in ((False, "s"), (True, "ss")):
                try:
                    want = stream_deltas(tok, ids, skip)
                except Exception:  # DecodeStream's InvalidPrefix: nothing to compare with
                    continue
                if "".join(want) != tok.decode(ids, skip_special_tokens=skip):
                    continue  # DecodeStream lost text (a trailing U+FFFD it never flushes)
                n_stream_cmp += 1
                got_d = g[key][:-1]  # the last is finish's, which DecodeStream lacks
                if got_d != want:
                    bad.append(f"stream skip={skip} {ids}: want {want}, got {g[key]}")
    dt = time.monotonic() - t0
    print(f"{fam}: {n_enc} strings encoded x2, {len(seqs)} id sequences decoded x2 and streamed x2, "
          f"{n_stream_cmp} streams compared with DecodeStream: {len(bad)} mismatches ({dt:.1f} s)")
    for b in bad[:SHOW]:
        print("  FAIL " + b[:600])
    return len(bad)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    runner, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    fams = sys.argv[3:] or FAMILIES
    corpus = tok_corpus.make_corpus(20261203, N_STRINGS) + EXTRA
    rng = random.Random(7)
    total = sum(check_family(runner, fam, corpus, rng) for fam in fams)
    print(f"{len(fams)} families x {len(corpus)} strings: {total} mismatches")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
