"""tests/llm/tok/make_tokenizers.py: builds the tokenizer.json fixtures of
tests/llm/tok/fixtures/<family>/ offline with the `tokenizers` library: a
small BPE vocabulary is trained on tok_corpus's strings (seed 1, not the
test's seed) for each family and the tokenizer is configured as that
family's published tokenizer.json is (transformers' convert_slow_tokenizer:
GPT2Converter, TikTokenConverter for Llama 3, Qwen2Converter, MistralConverter
for Tekken, LlamaConverter legacy and non-legacy):

  gpt2      ByteLevel pre-tokenizer with GPT-2's own pattern, ByteLevel
            decoder, <|endoftext|>; plus a RoBERTa-style <mask> (lstrip) and
            two non-special tokens (a normalized one and a single_word one)
  llama3    Split (Llama 3's pattern, Isolated) + ByteLevel(use_regex false),
            ignore_merges, <|begin_of_text|> etc., TemplateProcessing adding BOS
  qwen2     NFC, Split (Qwen2's pattern: single digits), ByteLevel,
            <|endoftext|>, <|im_start|>, <|im_end|>, non-special <tool_call>
  tekken    Mistral's Tekken pattern (case-split words, [\\r\\n/]*), ignore_merges,
            <s> [INST] [/INST] [TOOL_CALLS] at ids 0.., template adding <s>
  llama2    SentencePiece BPE: Prepend("▁") + Replace(" ", "▁") normalizer,
            byte_fallback <0xXX> tokens, fuse_unk, decoder Replace, ByteFallback,
            Fuse, Strip; template adding <s>
  mistral   the non-legacy form (Mistral 7B v0.3): no normalizer, Metaspace
            pre-tokenizer (prepend_scheme first, split false), same decoder,
            [INST] and [/INST] special
  metaspace Metaspace with prepend_scheme always and split true, Metaspace
            decoder, byte fallback, an rstrip special token

    make_tokenizers.py [OUT_DIR]     (default: tests/llm/tok/fixtures)

The outputs are committed (each well under 300 KB); rerun only to change them.
"""
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tok_corpus  # noqa: E402

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                  r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPM_DECODER = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                 decoders.Strip(content=" ", left=1)])


def corpus():
    # without the strings of gpt2's non-special added tokens, so that they are
    # no vocabulary words and matching them (single_word or not) shows in the ids
    own = ("hello world", "zqj", "xzqj", "zqj_")
    return tok_corpus.make_corpus(1, 6000, specials=[s for s in tok_corpus.SPECIALS if s not in own])


def byte_level(pre, vocab_size, normalizer=None, ignore_merges=False):
    tok = Tokenizer(BPE(ignore_merges=ignore_merges) if ignore_merges else BPE())
    if normalizer:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    trainer = BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                         show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    tok.decoder = decoders.ByteLevel()
    return tok


def sentencepiece(vocab_size, normalizer, pre, decoder, limit_alphabet=120):
    """Llama 2's layout: <unk> <s> </s>, the 256 <0xXX> tokens, then the
    trained pieces; byte_fallback and fuse_unk. Trained with a Metaspace
    pre-tokenizer (words), then given the family's own pipeline."""
    tok = Tokenizer(BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    specials = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    trainer = BpeTrainer(vocab_size=vocab_size, special_tokens=specials, limit_alphabet=limit_alphabet,
                         show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    j = json.loads(tok.to_str())
    # the byte tokens are vocabulary, not added tokens, as in Llama 2's file
    j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] in ("<unk>", "<s>", "</s>")]
    j["normalizer"] = json.loads(normalizer.__getstate__()) if normalizer else None
    tok = Tokenizer.from_str(json.dumps(j))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoder
    return tok


def bos_template(bos, bos_id):
    return processors.TemplateProcessing(single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
                                         special_tokens=[(bos, bos_id)])


def build(family):
    """(tokenizer, tokenizer_config dict)"""
    if family == "gpt2":
        tok = byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True), 2500)
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
        tok.add_special_tokens([AddedToken("<mask>", special=True, lstrip=True, normalized=False)])
        tok.add_tokens([AddedToken("hello world", normalized=True), AddedToken("zqj", single_word=True)])
        return tok, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    if family == "llama3":
        tok = byte_level(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)]), 2500,
            ignore_merges=True)
        names = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                 "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                 "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
        names += ["<|reserved_special_token_%d|>" % i for i in range(3, 20)]
        tok.add_special_tokens([AddedToken(n, special=True, normalized=False) for n in names])
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
            bos_template("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
        return tok, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
    if family == "qwen2":
        tok = byte_level(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), 2500, normalizer=normalizers.NFC())
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        tok.add_special_tokens([AddedToken(n, special=True, normalized=False)
                                for n in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]])
        tok.add_tokens([AddedToken(n, special=False, normalized=False) for n in ["<tool_call>", "</tool_call>"]])
        return tok, {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    if family == "tekken":
        specials = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]",
                    "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"]
        tok = Tokenizer(BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(TEKKEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        trainer = BpeTrainer(vocab_size=2500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=[AddedToken(s, special=True, normalized=False) for s in specials],
                             show_progress=False)
        tok.train_from_iterator(corpus(), trainer)
        tok.decoder = decoders.ByteLevel()
        tok.post_processor = bos_template("<s>", tok.token_to_id("<s>"))
        return tok, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    if family == "llama2":
        norm = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok = sentencepiece(1500, norm, None, SPM_DECODER)
        tok.post_processor = bos_template("<s>", 1)
        return tok, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True,
                     "legacy": True}
    if family == "mistral":
        tok = sentencepiece(1500, None, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                                                 split=False), SPM_DECODER)
        tok.add_special_tokens([AddedToken(n, special=True, normalized=False) for n in ["[INST]", "[/INST]"]])
        tok.post_processor = bos_template("<s>", 1)
        return tok, {"bos_token": {"content": "<s>"}, "eos_token": {"content": "</s>"}, "legacy": False}
    if family == "metaspace":
        tok = sentencepiece(1200, None, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always",
                                                                 split=True),
                            decoders.Sequence([decoders.ByteFallback(),
                                               decoders.Metaspace(replacement="▁", prepend_scheme="always")]),
                            limit_alphabet=80)
        tok.add_special_tokens([AddedToken("<pad>", special=True, rstrip=True, normalized=False)])
        return tok, {"bos_token": "<s>", "eos_token": "</s>"}
    raise ValueError(family)


FAMILIES = ["gpt2", "llama3", "qwen2", "tekken", "llama2", "mistral", "metaspace"]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    for fam in FAMILIES:
        tok, cfg = build(fam)
        d = os.path.join(out, fam)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"), pretty=False)
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        size = os.path.getsize(os.path.join(d, "tokenizer.json"))
        print(f"{fam}: vocab {tok.get_vocab_size()}, {size} bytes")


if __name__ == "__main__":
    main()
