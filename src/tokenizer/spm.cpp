// spm.cpp — SentencePiece BPE as llama.cpp runs it (shared/spec/gguf.md §4.3).
//
// Unlike byte-level BPE there are no merge rules: any two adjacent symbols whose concatenation
// is a token may merge, and the pair whose token has the highest score merges first (leftmost
// on ties). Symbols start as UTF-8 characters; a final symbol that is not a token is spelled
// with byte-fallback tokens <0xXX>. Every merged symbol is a token by construction, so
// llama.cpp's "resegment" step reduces to: token, or its bytes.
#include <algorithm>

#include "common/error.h"
#include "encoders.h"
#include "unicode.h"

namespace gaacrt::tok {
namespace {

struct Symbol {
  uint32_t start, len;  // bytes of the text; len 0 = merged into its left neighbour
  int32_t prev, next;
};

struct Bigram {
  float score;
  int32_t left, right;
  uint32_t len;
};

// Top of the heap: highest score, then lowest left index.
struct PopsLater {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void spm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t offs = 0; offs < text.size();) {
    // The lead byte announces the character's length; malformed input is cut the same way
    // (no validation), and its bytes end up as byte-fallback tokens.
    const size_t len = std::min(utf8_len_from_lead(static_cast<uint8_t>(text[offs])), text.size() - offs);
    const auto idx = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(offs), static_cast<uint32_t>(len), idx - 1,
                   offs + len == text.size() ? -1 : idx + 1});
    offs += len;
  }

  std::vector<Bigram> heap;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;
    const int32_t id = v.find(text.substr(sym[l].start, len));  // adjacent symbols are contiguous
    if (id == kNoToken) return;
    heap.push_back({v.score[id], l, r, len});
    std::push_heap(heap.begin(), heap.end(), PopsLater());
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), PopsLater());
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i != -1; i = sym[i].next) {
    const std::string_view s = text.substr(sym[i].start, sym[i].len);
    if (int32_t id = v.find(s); id != kNoToken) { out.push_back(id); continue; }
    for (char c : s) {
      const int32_t id = v.byte_token[static_cast<uint8_t>(c)];
      if (id == kNoToken)
        throw Error("tokenizer", "no_byte_token",
                    strfmt("SentencePiece byte fallback: the vocabulary has neither <0x%02X> nor the raw byte",
                           static_cast<uint8_t>(c)));
      out.push_back(id);
    }
  }
}

}  // namespace gaacrt::tok
