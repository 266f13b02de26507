// pretokenize.cpp — hand-written matchers for the BPE pre-tokenizer regexes (spec §4.1).
//
// Each matcher walks one piece [b, e) left to right and, at every position, tries the regex
// alternatives in their written order, exactly as a backtracking regex engine would choose
// between them. Positions outside the piece read as flags 0 / code point kNone, which is how
// the lookahead (?!\S) sees "end of text": a piece is matched as if it were the whole input.
#include "pretokenize.h"

#include "unicode.h"

namespace gaacrt::tok {
namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;
constexpr uint16_t kWS = CPT_WHITESPACE, kL = CPT_LETTER, kN = CPT_NUMBER;

struct Piece {
  const uint32_t* cp;
  const uint16_t* fl;
  size_t b, e;
  std::vector<uint32_t>* out;
  size_t emitted;  // end of the last piece written

  uint16_t flags(size_t i) const { return i < e ? fl[i] : 0; }
  uint32_t cpt(size_t i) const { return i < e ? cp[i] : kNone; }
  // Ends the current piece at `end` (> emitted) and returns end, the next start position.
  size_t emit(size_t end) {
    out->push_back(static_cast<uint32_t>(end - emitted));
    emitted = end;
    return end;
  }
};

inline bool is_nl(uint32_t c) { return c == '\r' || c == '\n'; }
inline uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Length of the contraction ('s 't 'm 'd 're 've 'll) at pos, or 0. `fold` makes it case
// insensitive, as LLAMA3's (?i:...) group. Only ASCII folds matter: no other code point
// lower-cases to one of s t m d r e v l.
size_t contraction_at(const Piece& p, size_t pos, bool fold) {
  if (p.cpt(pos) != '\'' || pos + 1 >= p.e) return 0;
  auto lc = [&](size_t i) { const uint32_t c = p.cpt(i); return fold ? ascii_lower(c) : c; };
  const uint32_t c1 = lc(pos + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 >= p.e) return 0;
  const uint32_t c2 = lc(pos + 2);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// True for [^\s\p{L}\p{N}] inside the piece ("other": punctuation, symbols, marks, controls).
inline bool is_other(uint16_t f) { return f != 0 && !(f & (kWS | kL | kN)); }

void match_gpt2(Piece& p) {
  size_t pos = p.b;
  while (pos < p.e) {
    if (size_t n = contraction_at(p, pos, false)) { pos = p.emit(pos + n); continue; }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional leading space, then a run.
    size_t q = pos + (p.cpt(pos) == ' ' ? 1 : 0);
    const uint16_t f = p.flags(q);
    if (f & kL) { while (p.flags(q) & kL) ++q; pos = p.emit(q); continue; }
    if (f & kN) { while (p.flags(q) & kN) ++q; pos = p.emit(q); continue; }
    if (is_other(f)) { while (is_other(p.flags(q))) ++q; pos = p.emit(q); continue; }
    // '\s+(?!\S)': a whitespace run not followed by a non-space; when something follows, the
    // run gives its last character back so that it can prefix the next word (" word").
    size_t w = pos;
    while (p.flags(w) & kWS) ++w;
    if (w - pos > 1 && w < p.e) { pos = p.emit(w - 1); continue; }
    if (w > pos) { pos = p.emit(w); continue; }
    pos = p.emit(pos + 1);  // matched by no alternative: one code point on its own
  }
}

// LLAMA3 (max_digits 3) and QWEN2 (max_digits 1).
void match_llama3(Piece& p, size_t max_digits) {
  size_t pos = p.b;
  while (pos < p.e) {
    if (size_t n = contraction_at(p, pos, true)) { pos = p.emit(pos + n); continue; }
    const uint32_t c = p.cpt(pos);
    const uint16_t f = p.flags(pos);
    // '[^\r\n\p{L}\p{N}]?\p{L}+': a letter run, optionally led by one non-letter, non-digit,
    // non-newline code point (a space, but also punctuation: "(word" is one piece).
    if (!is_nl(c) && !(f & kN) && ((f & kL) || (p.flags(pos + 1) & kL))) {
      size_t q = pos + 1;
      while (p.flags(q) & kL) ++q;
      pos = p.emit(q);
      continue;
    }
    // '\p{N}{1,3}'
    if (f & kN) {
      size_t q = pos;
      while ((p.flags(q) & kN) && q - pos < max_digits) ++q;
      pos = p.emit(q);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    size_t q = pos + (c == ' ' ? 1 : 0);
    if (is_other(p.flags(q))) {
      while (is_other(p.flags(q))) ++q;
      while (is_nl(p.cpt(q))) ++q;
      pos = p.emit(q);
      continue;
    }
    // '\s*[\r\n]+': a whitespace run up to and including its last newline.
    size_t w = pos, last_nl = 0;
    while (p.flags(w) & kWS) {
      if (is_nl(p.cpt(w))) last_nl = w + 1;
      ++w;
    }
    if (last_nl) { pos = p.emit(last_nl); continue; }
    // '\s+(?!\S)' then '\s+'
    if (w - pos > 1 && w < p.e) { pos = p.emit(w - 1); continue; }
    if (w > pos) { pos = p.emit(w); continue; }
    pos = p.emit(pos + 1);
  }
}

// A character-class regex: `run` = true for 'class+' (maximal runs are pieces), false for a bare
// 'class' (every matching code point is a piece). Text between matches stays one piece.
template <typename Pred>
void match_class(Piece& p, Pred in_class, bool run) {
  size_t pos = p.b;
  while (pos < p.e) {
    if (!in_class(p.cp[pos], p.fl[pos])) {
      size_t q = pos;
      while (q < p.e && !in_class(p.cp[q], p.fl[q])) ++q;
      pos = p.emit(q);
      continue;
    }
    size_t q = pos + 1;
    if (run) while (q < p.e && in_class(p.cp[q], p.fl[q])) ++q;
    pos = p.emit(q);
  }
}

// '[0-9][0-9][0-9]': leftmost non-overlapping triples of ASCII digits; the rest stays as gaps.
void match_digit_triples(Piece& p) {
  auto digit = [&](size_t i) { return i < p.e && p.cp[i] >= '0' && p.cp[i] <= '9'; };
  size_t pos = p.b, gap = p.b;
  while (pos < p.e) {
    if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      if (pos > gap) p.emit(pos);
      pos = gap = p.emit(pos + 3);
    } else {
      ++pos;
    }
  }
  if (p.e > gap) p.emit(p.e);
}

// '[\p{P}\$\+<=>\^~\|]': punctuation plus the ASCII math/currency symbols listed (not '`').
inline bool is_default_punct(uint32_t c, uint16_t f) {
  return (f & CPT_PUNCT) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
         c == '~' || c == '|';
}

enum class Stage { GPT2, LLAMA3, QWEN2, EACH_NUMBER, NUMBER_RUNS, DEFAULT_PUNCT_RUNS, DIGIT_TRIPLES };

void run_stage(Stage s, Piece& p) {
  switch (s) {
    case Stage::GPT2: match_gpt2(p); break;
    case Stage::LLAMA3: match_llama3(p, 3); break;
    case Stage::QWEN2: match_llama3(p, 1); break;
    case Stage::EACH_NUMBER: match_class(p, [](uint32_t, uint16_t f) { return (f & kN) != 0; }, false); break;
    case Stage::NUMBER_RUNS: match_class(p, [](uint32_t, uint16_t f) { return (f & kN) != 0; }, true); break;
    case Stage::DEFAULT_PUNCT_RUNS: match_class(p, is_default_punct, true); break;
    case Stage::DIGIT_TRIPLES: match_digit_triples(p); break;
  }
}

}  // namespace

const char* pre_type_name(PreType t) {
  switch (t) {
    case PreType::DEFAULT: return "default";
    case PreType::GPT2: return "gpt2";
    case PreType::SMOLLM: return "smollm";
    case PreType::LLAMA3: return "llama3";
    case PreType::QWEN2: return "qwen2";
  }
  return "?";
}

void pretokenize(PreType type, const uint32_t* cpts, const uint16_t* flags, size_t n,
                 std::vector<uint32_t>& lens) {
  static const std::vector<Stage> kDefault = {Stage::DEFAULT_PUNCT_RUNS, Stage::GPT2, Stage::NUMBER_RUNS,
                                              Stage::DIGIT_TRIPLES};
  static const std::vector<Stage> kGpt2 = {Stage::GPT2}, kSmollm = {Stage::EACH_NUMBER, Stage::GPT2},
                                  kLlama3 = {Stage::LLAMA3}, kQwen2 = {Stage::QWEN2};
  const std::vector<Stage>* stages = &kDefault;
  switch (type) {
    case PreType::DEFAULT: stages = &kDefault; break;
    case PreType::GPT2: stages = &kGpt2; break;
    case PreType::SMOLLM: stages = &kSmollm; break;
    case PreType::LLAMA3: stages = &kLlama3; break;
    case PreType::QWEN2: stages = &kQwen2; break;
  }
  lens.clear();
  if (n == 0) return;
  // Stage k re-splits every piece of stage k-1; the first stage sees the whole text.
  std::vector<uint32_t> in{static_cast<uint32_t>(n)};
  for (Stage s : *stages) {
    lens.clear();
    size_t start = 0;
    for (uint32_t len : in) {
      Piece p{cpts, flags, start, start + len, &lens, start};
      run_stage(s, p);
      start += len;
    }
    in.swap(lens);
  }
  lens.swap(in);
}

}  // namespace gaacrt::tok
