"""tests/llm/tok/tok_corpus.py: a deterministic corpus of strings that stress a
tokenizer: ASCII prose with contractions, accented Latin (precomposed and
decomposed), CJK, emoji (skin tones, flags, ZWJ families), code, runs of
whitespace (spaces, tabs, newlines, CRLF, Unicode spaces), runs of digits
(ASCII, Arabic-Indic, full-width, Roman, fractions), every family's special
tokens embedded in text, and valid but awkward Unicode (combining marks,
right-to-left text and overrides, variation selectors, BOM, U+FFFD,
noncharacters, astral letters). make_corpus(seed, n) is the same list for
the same arguments on every machine (random.Random only).

No string holds U+0000: the driver reads strings as C strings.
"""
import random

WORDS = ("the of and to in is you that it he was for on are as with his they I at be this have from or one had by "
         "word but not what all were we when your can said there use an each which she do how their if will up other "
         "about out many then them these so some her would make like him into time has look two more write go see "
         "number no way could people my than first water been call who oil its now find long down day did get come "
         "made may part tokenizer inference server batch stream GPU kernel Llama Qwen Mistral Transformer").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "’s"]
ACCENTED = ("café naïve résumé über straße façade jalapeño São Paulo Ærøskøbing Łódź Dvořák Việt Nam tiếng "
            "Ελληνικά Русский язык español Ñandú crème brûlée Zürich").split()
PUNCT = list(".,;:!?-()[]{}\"'/\\@#$%^&*_+=<>|~`") + ["...", "--", "!!", "?!", "’", "“", "”", "—", "…", "«", "»"]
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
            "<|reserved_special_token_3|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>",
            "</tool_call>", "<s>", "</s>", "<unk>", "[INST]", "[/INST]", "[TOOL_CALLS]", "<mask>", "<|im_start",
            "<s", "[INST", "<|", "|>", "<pad>", "hello world", "zqj", "xzqj", "zqj_"]
EMOJI = ["😀", "👍", "👍🏽", "🇫🇷", "🇯🇵", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏿‍💻", "❤️", "✈︎", "🤷‍♀️", "🫠", "🐍",
         "👩‍❤️‍💋‍👨", "#️⃣", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\n ", " \t ", "\u00a0", "\u3000", "\u2003",
          "\u2009", "\u200b", "\u180e", "\u0085", "\u2028", "\u2029", "\u001c", "\u001f", "\x0b", "\x0c", "\r",
          "    ", "\n\n\n", " \r\n\t"]
DIGITS = ["0123456789", "٣٤٥", "１２３", "²³", "Ⅻ", "½", "¾", "੧੨", "๓", "10,000", "3.14159", "-42", "1e-9", "0x1F",
          "2026-12-03", "12:30:45", "１０", "𝟘𝟙𝟚"]
CODE = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}\n",
        "if x == None:\n\tpass", "#include <stdio.h>\nint main(void) { return 0; }", "SELECT * FROM t WHERE id=7;",
        "    x = [1, 2, 3]  # list\n", "const f = (a) => a?.b ?? 0;", "<div class=\"a\">&amp;</div>",
        "λx.x", "fn main() -> Result<(), Box<dyn Error>> {}", "a_b-c.d/e\\f", "    \n    \n"]
ODD = ["e\u0301", "a\u0308\u0304", "Z\u0351\u0352\u0357\u035b\u0330", "\u05e9\u05dc\u05d5\u05dd", "مرحبا بالعالم",
       "\u202eevil\u202c", "\u2066iso\u2069", "\ufe0f", "\u200d", "\u200c", "\ufeffBOM", "\ufffd", "\uffff",
       "\U0001d518\U0001d52b\U0001d526", "한국어 텍스트", "ｶﾀｶﾅ", "Å", "A\u030a", "ﬁ", "ǅ", "\u0345", "\u1e9e",
       "\u0130", "ς", "\U00010000", "\U0010fffd", "ก่", "\u0b95\u0bcd\u0bb7", "\u0915\u094d\u0937"]


def _cjk(r):
    blocks = [(0x4E00, 0x9FFF), (0x3040, 0x309F), (0x30A0, 0x30FF), (0xAC00, 0xD7A3), (0x3400, 0x4DBF)]
    a, b = r.choice(blocks)
    return "".join(chr(r.randint(a, b)) for _ in range(r.randint(1, 12)))


def _prose(r):
    out = []
    for _ in range(r.randint(1, 25)):
        w = r.choice(WORDS)
        if r.random() < 0.15:
            w = w.capitalize()
        if r.random() < 0.05:
            w = w.upper()
        if r.random() < 0.08:
            w += r.choice(CONTRACTIONS)
        out.append(w)
        if r.random() < 0.12:
            out.append(r.choice(PUNCT))
    return " ".join(out)


def _piece(r, specials):
    k = r.random()
    if k < 0.30:
        return _prose(r)
    if k < 0.38:
        return " ".join(r.choice(ACCENTED) for _ in range(r.randint(1, 5)))
    if k < 0.45:
        return _cjk(r)
    if k < 0.51:
        return "".join(r.choice(EMOJI) for _ in range(r.randint(1, 4)))
    if k < 0.58:
        return r.choice(CODE)
    if k < 0.65:
        return "".join(r.choice(SPACES) for _ in range(r.randint(1, 4)))
    if k < 0.72:
        return "".join(r.choice(DIGITS) for _ in range(r.randint(1, 3))) + "".join(
            r.choice("0123456789") for _ in range(r.randint(0, 9)))
    if k < 0.82:
        return r.choice(specials)
    if k < 0.90:
        return r.choice(ODD)
    # arbitrary code points (no surrogates, no NUL) below U+30000: PCRE2 10.42
    # knows Unicode 14, tokenizers' Oniguruma a later one that assigned
    # letters up there (CJK Extension H, U+31350-U+323AF, in Unicode 15)
    s = []
    for _ in range(r.randint(1, 6)):
        c = r.choice([r.randint(1, 0x7F), r.randint(0x80, 0x7FF), r.randint(0x800, 0xFFFF), r.randint(0x10000, 0x2FFFF)])
        if 0xD800 <= c <= 0xDFFF:
            c = 0x41
        s.append(chr(c))
    return "".join(s)


def make_corpus(seed, n, specials=SPECIALS):
    r = random.Random(seed)
    out = ["", " ", "  ", "\n", "a", "A", "hello", " hello", "hello ", "Hello world!", "I'm", "don't", "<s>", "</s>",
           "<|im_start|>user\nhi<|im_end|>", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
           "[INST] hi [/INST]", "▁", "▁▁x", "<0x41>", "Ġ", "ĠĠ"]
    while len(out) < n:
        parts = [_piece(r, specials) for _ in range(r.randint(1, 5))]
        sep = r.choice(["", " ", "", "\n", " "])
        out.append(sep.join(parts))
    return out[:n]
