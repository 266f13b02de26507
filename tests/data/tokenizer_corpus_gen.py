#!/usr/bin/env python3
"""tokenizer_corpus_gen.py — writes tests/data/tokenizer_corpus.json, the strings every
tokenizer test compares on (token ids against llama.cpp and HF tokenizers, round trips).

    python3 tests/data/tokenizer_corpus_gen.py        # deterministic: same file every run

The corpus is hand-picked groups (each aimed at a tokenizer rule: contractions, digit
splitting, whitespace runs and (?!\\S), newline handling, byte fallback, special-token texts,
code-point classes new in Unicode 15/15.1 ...) plus strings mixed from those groups with a
fixed random seed. "malformed" holds hex byte strings that are not valid UTF-8.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "tokenizer_corpus.json"

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world",
    "Hello, world! How are you today?",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "In 1492, Columbus sailed the ocean blue.",
    "She sells sea shells by the sea shore; the shells she sells are surely seashells.",
    "Tokenizers split text into pieces called tokens, which are then mapped to integer ids.",
    "A large language model predicts the next token given the previous ones.",
    "Mr. and Mrs. Smith arrived at 5 p.m. on Friday, Jan. 3rd.",
    "\"Quoted speech,\" she said, \"is tricky.\"",
    "Parentheses (like these) and brackets [like these] and braces {like these}.",
    "Semi-colons; colons: dashes - em-dashes \u2014 and en-dashes \u2013 all differ.",
    "Ellipsis... and the Unicode ellipsis\u2026 too.",
    "Why? Because! Really?! Yes!!! No??",
    "The U.S.A. and the U.K. signed the agreement.",
    "100% of the time, 50% of the effort.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
    "Once upon a time there was a little model that wanted to learn how to speak.",
    "   leading spaces and trailing spaces   ",
    "multiple     spaces     between     words",
    "CamelCaseWordsAndsnake_case_words and kebab-case-words",
    "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS #@!",
    "tHiS iS sPoNgEbOb CaSe",
    "e.g. i.e. etc. vs. cf. al.",
    "The price is $19.99 (or \u20ac17,50 or \u00a315).",
    "First line.\nSecond line.\nThird line.",
    "Paragraph one.\n\nParagraph two.\n\n\nParagraph three.",
    "Dear Sir or Madam,\r\n\r\nI am writing to you.\r\n",
    "Bullet list:\n- one\n- two\n  - nested\n* star",
    "Numbered:\n1. first\n2. second\n10. tenth",
    "Q: What is 2+2?\nA: 4.",
    "He said 'hello' and she said 'goodbye'.",
]

CODE = [
    "def hello(name):\n    return f\"Hello, {name}!\"\n",
    "for i in range(10):\n\tprint(i * 2, i ** 2)\n",
    "class Foo(Bar):\n    def __init__(self, x: int = 0) -> None:\n        self.x = x\n",
    "import numpy as np\nx = np.arange(12).reshape(3, 4)\nprint(x.T @ x)",
    "#include <stdio.h>\nint main(void) {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n",
    "template <typename T>\nT max(T a, T b) { return a > b ? a : b; }",
    "std::vector<std::pair<int, std::string>> v{{1, \"a\"}, {2, \"b\"}};",
    "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);",
    "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "SELECT name, COUNT(*) AS n FROM users WHERE age >= 18 GROUP BY name ORDER BY n DESC;",
    "<html>\n  <body>\n    <div class=\"x\">Hi &amp; bye</div>\n  </body>\n</html>",
    "<table><tr><td>1</td><td>2</td></tr></table>",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\"; done\n",
    "{\"name\": \"gaacrt\", \"version\": \"0.1.0\", \"tags\": [\"llm\", \"gguf\"], \"ok\": true}",
    "key: value\nlist:\n  - a\n  - b\nnested:\n  inner: 3.5\n",
    "x = [1,2,3]; y = {k: v for k, v in zip('abc', x)}",
    "if (a && b || !c) { x += 1; } else { x -= 1; }",
    "a == b != c <= d >= e << f >> g",
    "regex = r'^(?:[a-z0-9!#$%&*+/=?^_`{|}~-]+)$'",
    "    indented four\n        indented eight\n\t\ttab indented",
    "// comment\n/* block\n   comment */\n# hash comment",
    "print('it''s')  # doubled quote",
    "lambda x: x**2 + 3*x - 1",
    "arr[i][j] = arr[i-1][j-1] + 1;",
    "@decorator\ndef f(*args, **kwargs): ...",
    "0x1F 0b1010 0o777 1e-9 3.14f 10_000_000 1_000.5",
    "SELECT * FROM t WHERE id IN (1, 2, 3) AND name LIKE '%abc%';",
    "git commit -m \"fix: handle \\r\\n line endings\" && git push origin main",
]

NUMBERS = [
    "0", "7", "42", "123", "1234", "12345", "1234567890", "12345678901234567890123456789",
    "3.14159265358979323846", "-273.15", "+1 (555) 123-4567", "1,000,000", "1.000.000,00",
    "2024-05-09T07:35:25Z", "10:30:45.123", "192.168.0.1", "v1.2.3-rc.4",
    "\u0661\u0662\u0663\u0664", "\u0967\u0968\u0969", "\u2460\u2461\u2462", "\u00bd \u00bc \u00be",
    "x\u00b2 + y\u00b3 = z\u00b9", "\u2167 \u216b", "\uff11\uff12\uff13", "99 bottles of beer",
    "9999999999999999999999", "007", "3rd 21st 102nd", "1/2 3/4 5/8", "1e10 2E-5",
]

WHITESPACE = [
    "", " ", "  ", "   ", "    ", "\t", "\t\t", " \t ", "\n", "\n\n", "\r\n", "\r", " \n ",
    "a  b", "a   b", "a\tb", "a \tb", "a\t b", "a    \t\tb", "word   ", "   word",
    "a\u00a0b", "a\u3000b", "a\u2009b", "a\u200bb", "a\u2028b", "a\u0085b", "\u00a0\u00a0x",
    "  \n  \n  ", "\t\n\t\n", "x \n y", "trailing tab\t", "end with newline\n",
    "                                        forty spaces",
    "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\tmany tabs",
]

NEWLINES = [
    "a\nb", "a\n\nb", "a\n\n\nb", "a\r\nb", "a\r\n\r\nb", "a\rb", "a\n\rb", "line1\nline2\r\nline3\rline4",
    "\n\nstarts with newlines", "ends with newlines\n\n\n", "mixed \n\t \r\n spaces",
    "x:\n  - y\n\n  - z", "a.\nb!\nc?", "(\n)", "{\n}\n", "\"\n\"",
    "\n" * 40 + "forty newlines", "a" + "\r\n" * 5 + "b",
]

ACCENTS = [
    "caf\u00e9", "cafe\u0301", "na\u00efve", "nai\u0308ve", "r\u00e9sum\u00e9", "Cr\u00e8me br\u00fbl\u00e9e",
    "\u00c5ngstr\u00f6m", "A\u030angstro\u0308m", "Stra\u00dfe", "gro\u00df", "\u0130stanbul", "\u0131\u0130iI",
    "\u00f1and\u00fa", "S\u00e3o Paulo", "\u0141\u00f3d\u017a", "\u010ce\u0161tina", "Z\u0308\u0301a\u0300lgo\u0362",
    "\u1e9e\u00df", "Dvo\u0159\u00e1k", "Bj\u00f6rk Gu\u00f0mundsd\u00f3ttir", "e\u0301e\u0300e\u0302e\u0308",
    "\u01c4\u01c5\u01c6 digraphs", "\ufb01 ligature \ufb02",
]

CJK = [
    "\u4eca\u65e5\u306f\u3044\u3044\u5929\u6c17\u3067\u3059\u306d\u3002",
    "\u6211\u7231\u81ea\u7136\u8bed\u8a00\u5904\u7406\u3002",
    "\u4e2d\u6587\u5206\u8bcd\u5f88\u6709\u8da3\uff0c\u5bf9\u5427\uff1f",
    "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4.",
    "\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3068\u6f22\u5b57",
    "\u6771\u4eac\u30bf\u30ef\u30fc\u306f333m\u3067\u3059\u3002",
    "\u7e41\u9ad4\u4e2d\u6587\u8207\u7c21\u4f53\u4e2d\u6587",
    "\u3000\u5168\u89d2\u7a7a\u767d\u3000\u3068\u5168\u89d2\u6570\u5b57\uff11\uff12\uff13",
    "\u300c\u9264\u62ec\u5f27\u300d\u3010\u96a8\u62ec\u5f27\u3011",
    "\u9f98\u9f49\u9fa5 rare CJK",
    "\U00020000\U0002a6d6 CJK extension B",
    "\u3131\u314f\u3134\u3153 jamo",
    "mixed English \u548c\u4e2d\u6587 and \u65e5\u672c\u8a9e",
]

SCRIPTS = [
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u092e\u0947\u0902 \u0932\u093f\u0916\u093e \u0917\u092f\u093e \u0935\u093e\u0915\u094d\u092f\u0964",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0627\u0644\u0644\u063a\u0629 \u0627\u0644\u0639\u0631\u0628\u064a\u0629\u064f \u062c\u0645\u064a\u0644\u0629\u060c \u0623\u0644\u064a\u0633 \u0643\u0630\u0644\u0643\u061f",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",
    "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22\u0e44\u0e21\u0e48\u0e21\u0e35\u0e0a\u0e48\u0e2d\u0e07\u0e27\u0e48\u0e32\u0e07",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u041a\u0430\u043a \u0434\u0435\u043b\u0430?",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac: \u03b1\u03b2\u03b3\u03b4",
    "\u0540\u0561\u0575\u0565\u0580\u0565\u0576",
    "\u10e5\u10d0\u10e0\u10d7\u10e3\u10da\u10d8",
    "\u12a0\u121b\u122d\u129b",
    "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd",
    "\u09ac\u09be\u0982\u09b2\u09be",
    "Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u",
    "T\u00fcrk\u00e7e \u015fi\u015fli \u00e7ay",
    "\u1780\u17d2\u1798\u17c2\u179a",
    "\u0f56\u0f7c\u0f51\u0f0b\u0f61\u0f72\u0f42",
    "\u0d2e\u0d32\u0d2f\u0d3e\u0d33\u0d02",
    "\u1019\u103c\u1014\u103a\u1019\u102c",
]

EMOJI = [
    "\U0001f600", "\U0001f600\U0001f601\U0001f602", "I \u2764\ufe0f you", "\U0001f44d\U0001f3fd",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 family",
    "\U0001f469\u200d\U0001f4bb coder", "\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001f1fa\U0001f1f8\U0001f1ef\U0001f1f5 flags",
    "1\ufe0f\u20e3 keycap", "\U0001f9d1\U0001f3ff\u200d\U0001f680", "\u2615 coffee \u2615\u2615",
    "emoji\U0001f916robot", "\U0001fae0 melting face", "\U0001f4a9\U0001f525\U0001f4af",
    "\u263a \u2639 \u2660 \u2663 \u2665 \u2666", "\u00a9 \u00ae \u2122", "\U0001f170\ufe0f\U0001f171\ufe0f",
    "\U0001f9ec\U0001f9ea\U0001f52c science", "\U00013000\U00013001 hieroglyphs", "\U0001d400\U0001d401 math bold",
]

SPECIAL_TEXT = [
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n",
    "<|im_start|><|im_end|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|endoftext|>text after",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
    "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "</s>", "<s>",
    "<unused0> <unused99>", "[multimodal]", "<start_of_image><end_of_image>",
    "text<|im_start|>text", "<|im_start|<|im_end|>|>", "<<|im_start|>>", "< |im_start| >",
    "<repo_name>x<file_sep>y<filename>z", "<jupyter_code>print(1)<jupyter_output>1",
    "<h1>Title</h1><p>para</p><b>bold</b><i>it</i>", "<table>\n<tr>\n<td>x</td>\n</tr>\n</table>",
    "  <start_of_turn>  spaced  <end_of_turn>  ", "\n<|im_end|>\n", "<0x0A>", "<0xFF>",
    # Gemma has one token with a space inside, '>▁</': SentencePiece must not cut the text there.
    "x> </y", "<a href=\"#\"> </a> <p> </p>", "a >  </ b",
]

CONTRACTIONS = [
    "I'm", "I'M", "you're", "YOU'RE", "we've", "WE'VE", "they'll", "THEY'LL", "he'd", "HE'D",
    "it's", "IT'S", "don't", "DON'T", "can't", "won't", "we'Re", "y'all", "rock'n'roll",
    "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "''", "'", "'hello'", "O'Neil's",
    "the dog's bone's marrow", "students' books", "iPhone eBay McDonald's LaTeX",
]

URLS = [
    "https://example.com/path/to/page?query=1&b=two#frag",
    "http://localhost:8080/api/v1/users/42",
    "ftp://files.example.org/pub/file.tar.gz",
    "mailto:someone@example.com", "user.name+tag@sub.example.co.uk",
    "www.example.com", "C:\\Users\\name\\Documents\\file.txt", "/usr/share/common-licenses/GPL-3",
    "~/.cache/gaacrt/model.gguf", "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct",
    "git@github.com:ggml-org/llama.cpp.git", "@mention #hashtag $TICKER",
    "https://ja.wikipedia.org/wiki/\u6771\u4eac", "data:text/plain;base64,SGVsbG8=",
]

EDGES = [
    "a", "A", "z", "0", ".", ",", "!", "?", "-", "_", "~", "`", "^", "|", "$", "+", "<", ">", "=",
    "\\", "/", "\"", "#", "@", "&", "*", "%", "(", ")", "[", "]", "{", "}", ";", ":",
    "\u0000", "\u0001\u0002\u0003", "\u007f", "\u00ad soft hyphen", "\ufeffBOM", "\ufffd", "\ufffd\ufffd",
    "\u200e\u200f bidi marks", "\u202e reversed",
    "\U0010fffd", "\ue000 private use",
    # Code points assigned or re-classified in Unicode 15.0/15.1 (llama.cpp's tables are 15.1).
    "\u0cf3", "\u2ffc\u2ffd\u2ffe\u2fff", "\u31ef", "\U00031350\U00031351", "\U0002ebf0\U0002ebf1",
    "\U00011f00\U00011f04", "\U0001e4d0\U0001e4f0",
]

MALFORMED_HEX = [
    "ff", "fe ff", "c3", "e2 82", "f0 9f 98", "80", "bf", "c3 28", "a0 a1", "e2 28 a1", "e2 82 28",
    "f0 28 8c bc", "f0 90 28 bc", "f8 a1 a1 a1 a1", "fc a1 a1 a1 a1 a1", "c0 80", "c1 bf", "e0 80 80",
    "ed a0 80", "ed bf bf", "48 65 6c 6c 6f ff 20 77 6f 72 6c 64", "61 c3 62", "e6 97 a5 e6 9c",
    "20 ff 20", "3c 7c 69 6d 5f 73 74 61 72 74 7c 3e ff", "f0 9f 98 80 f0 9f 98",
]

# Malformed input on which llama.cpp itself aborts (it decodes a value above U+10FFFF and throws
# when re-encoding it); gaacrt must handle them without crashing and without llama.cpp to compare.
MALFORMED_BEYOND_UNICODE_HEX = ["f4 90 80 80", "f7 bf bf bf", "61 f5 80 80 80 62"]


def mixed(rng: random.Random, n: int) -> list[str]:
    pools = [PROSE, CODE, NUMBERS, WHITESPACE, NEWLINES, ACCENTS, CJK, SCRIPTS, EMOJI, SPECIAL_TEXT,
             CONTRACTIONS, URLS, EDGES]
    seps = ["", " ", "  ", "\n", "\t", "\r\n", " - ", ": "]
    out = []
    for _ in range(n):
        k = rng.randint(2, 4)
        parts = [rng.choice(rng.choice(pools)) for _ in range(k)]
        out.append(rng.choice(seps).join(parts))
    return out


def build() -> dict:
    rng = random.Random(20260503)
    texts = (PROSE + CODE + NUMBERS + WHITESPACE + NEWLINES + ACCENTS + CJK + SCRIPTS + EMOJI + SPECIAL_TEXT
             + CONTRACTIONS + URLS + EDGES + mixed(rng, 80))
    seen, uniq = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            uniq.append(t)
    return {"texts": uniq, "malformed_hex": MALFORMED_HEX,
            "malformed_beyond_unicode_hex": MALFORMED_BEYOND_UNICODE_HEX}


def main() -> None:
    data = build()
    OUT.write_text(json.dumps(data, ensure_ascii=True, indent=0) + "\n")
    print(f"wrote {OUT}: {len(data['texts'])} texts, {len(data['malformed_hex'])} malformed byte strings")


if __name__ == "__main__":
    main()
