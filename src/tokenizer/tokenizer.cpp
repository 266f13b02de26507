// tokenizer.cpp — special-token partition, BOS/EOS, token_to_piece, detokenize and the
// streaming decoder (shared/spec/gguf.md §4.3 "Detokenize", §4.4). See tokenizer.h.
#include "tokenizer.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "encoders.h"
#include "gguf/gguf_reader.h"
#include "unicode.h"

namespace gaacrt::tok {
namespace {

// C locale isspace: what lstrip/rstrip special tokens eat.
inline bool c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

const char kSpmSpace[] = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// HF clean_up_tokenization_spaces, in place and in llama.cpp's three passes. Each pass reads
// the previous character from the buffer it is rewriting (the second pass blanks the space it
// skips), so the passes are kept exactly in this form.
void clean_spaces(std::string& t) {
  int32_t total = static_cast<int32_t>(t.size());
  // " ?", " !", " .", " ,": drop the space.
  const int32_t total1 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total1; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
    t[total++] = x;
  }
  // " ' ": drop both spaces around a lone apostrophe.
  const int32_t total2 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total2; ++i) {
    const char x = t[i];
    if (x == '\'' && i + 1 < total2 && t[i - 1] == ' ' && t[i + 1] == ' ') {
      total--;
      t[++i] = '\0';
    }
    t[total++] = x;
  }
  // " 's", " 'm", " 're", " 've": drop the space (" 't", " 'd", " 'll" keep it).
  const int32_t total3 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total3; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm') {
        total--;
      } else if (i + 2 < total3) {
        const char x2 = t[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
      }
    }
    t[total++] = x;
  }
  t.resize(total);
}

}  // namespace

Tokenizer::Tokenizer(const GGUFFile& f) : Tokenizer(Vocab::load(f)) {}

Tokenizer::Tokenizer(std::shared_ptr<const Vocab> vocab) : vocab_(std::move(vocab)) {
  trie_next_.emplace_back();
  trie_token_.push_back(kNoToken);
  for (int32_t id : vocab_->special_tokens) {
    const std::string& t = vocab_->text[id];
    first_byte_[static_cast<uint8_t>(t[0])] = true;
    int32_t node = 0;
    for (char ch : t) {
      const auto b = static_cast<uint8_t>(ch);
      int32_t child = -1;
      for (auto& [cb, cn] : trie_next_[node])
        if (cb == b) child = cn;
      if (child < 0) {
        child = static_cast<int32_t>(trie_next_.size());
        trie_next_[node].emplace_back(b, child);
        trie_next_.emplace_back();
        trie_token_.push_back(kNoToken);
      }
      node = child;
    }
    trie_token_[node] = id;
  }
}

void Tokenizer::partition(std::string_view text, bool parse_special, std::vector<Fragment>& frags) const {
  frags.clear();
  if (text.empty()) return;
  frags.push_back({kNoToken, 0, static_cast<uint32_t>(text.size())});

  // Which special texts occur anywhere in the input? Only those can split a fragment, and
  // there are few of them, while a vocabulary may have thousands (Gemma: 6,400).
  std::vector<int32_t> present;
  std::vector<uint8_t> seen(trie_token_.size(), 0);  // per trie node: token already listed
  for (size_t p = 0; p < text.size(); ++p) {
    if (!first_byte_[static_cast<uint8_t>(text[p])]) continue;
    int32_t node = 0;
    for (size_t q = p; q < text.size(); ++q) {
      int32_t child = -1;
      for (auto& [cb, cn] : trie_next_[node])
        if (cb == static_cast<uint8_t>(text[q])) child = cn;
      if (child < 0) break;
      node = child;
      if (trie_token_[node] != kNoToken && !seen[node]) {
        seen[node] = 1;
        present.push_back(trie_token_[node]);
      }
    }
  }
  if (present.empty()) return;
  std::sort(present.begin(), present.end());

  // Longest special first, each cutting every raw fragment at its leftmost non-overlapping
  // occurrences; this order decides overlaps, so it is not a single leftmost-longest scan.
  const Vocab& v = *vocab_;
  std::vector<Fragment> next;
  for (int32_t id : v.special_tokens) {
    if (!std::binary_search(present.begin(), present.end(), id)) continue;
    const uint32_t attr = v.attr[id];
    if (!parse_special && (attr & (ATTR_CONTROL | ATTR_UNKNOWN))) continue;
    const std::string& st = v.text[id];
    next.clear();
    for (const Fragment& fr : frags) {
      if (fr.token != kNoToken) { next.push_back(fr); continue; }
      size_t pos = fr.off;
      const size_t end = fr.off + fr.len;
      while (pos < end) {
        const size_t m = text.substr(0, end).find(st, pos);
        if (m == std::string_view::npos) break;
        size_t left = m - pos;
        if (attr & ATTR_LSTRIP) while (left > 0 && c_space(text[pos + left - 1])) --left;
        if (left > 0) next.push_back({kNoToken, static_cast<uint32_t>(pos), static_cast<uint32_t>(left)});
        next.push_back({id, 0, 0});
        pos = m + st.size();
        if (attr & ATTR_RSTRIP) while (pos < end && c_space(text[pos])) ++pos;
      }
      if (pos < end) next.push_back({kNoToken, static_cast<uint32_t>(pos), static_cast<uint32_t>(end - pos)});
    }
    frags.swap(next);
  }
}

std::vector<int32_t> Tokenizer::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  if (text.size() > 0x7FFFFFFFu)
    throw Error("tokenizer", "text_too_long", strfmt("tokenize: %zu bytes (at most 2 GiB)", text.size()));
  const Vocab& v = *vocab_;
  std::vector<Fragment> frags;
  partition(text, parse_special, frags);

  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && v.add_bos) out.push_back(v.bos);
  if (v.type == VocabType::SPM) {
    // A fragment that starts the text or follows a special token gets the leading space that
    // SentencePiece models were trained with (when add_space_prefix); then ' ' -> U+2581.
    bool prev_special = true;
    std::string t;
    for (const Fragment& fr : frags) {
      if (fr.token != kNoToken) {
        out.push_back(fr.token);
        prev_special = true;
        continue;
      }
      t.clear();
      if (v.add_space_prefix && prev_special) t += ' ';
      t.append(text.substr(fr.off, fr.len));
      if (v.escape_whitespaces) {
        std::string esc;
        esc.reserve(t.size() + t.size() / 4);
        for (char c : t) {
          if (c == ' ') esc += kSpmSpace; else esc += c;
        }
        t.swap(esc);
      }
      spm_encode(v, t, out);
      prev_special = false;
    }
  } else {
    for (const Fragment& fr : frags) {
      if (fr.token != kNoToken) out.push_back(fr.token);
      else bpe_encode(v, text.substr(fr.off, fr.len), out);
    }
  }
  if (add_special && v.add_eos) out.push_back(v.eos);
  return out;
}

int32_t Tokenizer::tokenize(std::string_view text, int32_t* out, int32_t capacity, bool add_special,
                            bool parse_special) const {
  const std::vector<int32_t> ids = tokenize(text, add_special, parse_special);
  const auto n = static_cast<int32_t>(ids.size());
  if (n > capacity) return -n;
  std::copy(ids.begin(), ids.end(), out);
  return n;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special, int lstrip) const {
  const Vocab& v = *vocab_;
  v.check_id(id, "token_to_piece");
  if (!special && (v.attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN))) return {};
  const std::string& p = v.piece[id];
  size_t skip = 0;
  while (static_cast<int>(skip) < lstrip && skip < p.size() && p[skip] == ' ') ++skip;
  return p.substr(skip);
}

std::string Tokenizer::detokenize(const int32_t* ids, size_t n, bool remove_special, bool unparse_special) const {
  const Vocab& v = *vocab_;
  bool remove_space = v.add_space_prefix;
  if (remove_special && v.add_bos && n > 0 && ids[0] == v.bos) {
    remove_space = false;  // as llama_detokenize: a removed BOS keeps the first word's space
    ++ids;
    --n;
  }
  if (remove_special && v.add_eos && n > 0 && ids[n - 1] == v.eos) --n;
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += token_to_piece(ids[i], unparse_special, remove_space ? 1 : 0);
    remove_space = false;
  }
  if (v.clean_spaces) clean_spaces(out);
  return out;
}

int32_t Tokenizer::detokenize(const int32_t* ids, size_t n, char* buf, int32_t capacity, bool remove_special,
                              bool unparse_special) const {
  const std::string s = detokenize(ids, n, remove_special, unparse_special);
  const auto len = static_cast<int32_t>(s.size());
  if (len > capacity) return -len;
  std::memcpy(buf, s.data(), s.size());
  return len;
}

StreamDecoder::StreamDecoder(std::shared_ptr<const Vocab> vocab, bool special)
    : vocab_(std::move(vocab)), special_(special) {}

std::string StreamDecoder::push(int32_t id) {
  const Vocab& v = *vocab_;
  v.check_id(id, "decoder.push");
  if (special_ || !(v.attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN))) {
    const std::string& p = v.piece[id];
    size_t skip = (first_ && v.add_space_prefix && !p.empty() && p[0] == ' ') ? 1 : 0;
    pending_.append(p, skip, std::string::npos);
  }
  first_ = false;
  return take(false);
}

std::string StreamDecoder::flush() { return take(true); }

std::string StreamDecoder::take(bool final) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  const auto* p = reinterpret_cast<const uint8_t*>(pending_.data());
  const size_t n = pending_.size();
  size_t i = 0;
  while (i < n) {
    const int r = utf8_complete_len(p + i, n - i);
    if (r > 0) {
      out.append(pending_, i, r);
      i += r;
    } else if (r == 0) {  // the start of a character whose remaining bytes have not arrived
      if (!final) break;
      out += kReplacement;
      i = n;
    } else {
      out += kReplacement;
      i += static_cast<size_t>(-r);
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace gaacrt::tok
