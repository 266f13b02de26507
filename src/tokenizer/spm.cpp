// spm.cpp — SentencePiece BPE as llama.cpp runs it (shared/spec/gguf.md §4.3).
//
// Unlike byte-level BPE there are no merge rules: any two adjacent symbols whose concatenation
// is a token may merge, and the pair whose token has the highest score merges first (leftmost
// on ties). Symbols start as UTF-8 characters; a final symbol that is not a token is spelled
// with byte-fallback tokens <0xXX>. Every merged symbol is a token by construction, so
// llama.cpp's "resegment" step reduces to: token, or its bytes. llama.cpp runs one heap over the
// whole fragment; the text is cut here where no token can span a symbol boundary, which gives
// the same merges (see merge_segment) and is what makes long texts fast.
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
    sym.push_back({static_cast<uint32_t>(offs), static_cast<uint32_t>(len), -1, -1});
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

  // Merge one segment [b, e) of symbols: where no token can span two neighbours (see
  // Vocab::may_join) the merge order on one side never involves the other, so running each
  // segment alone gives exactly the whole-text result, with small heaps instead of one the size
  // of the text.
  auto merge_segment = [&](int32_t b, int32_t e) {
    for (int32_t i = b; i < e; ++i) {
      sym[i].prev = i - 1 >= b ? i - 1 : -1;
      sym[i].next = i + 1 < e ? i + 1 : -1;
    }
    heap.clear();
    for (int32_t i = b + 1; i < e; ++i) try_add(i - 1, i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), PopsLater());
      const Bigram bg = heap.back();
      heap.pop_back();
      Symbol& l = sym[bg.left];
      Symbol& r = sym[bg.right];
      if (l.len == 0 || r.len == 0 || l.len + r.len != bg.len) continue;  // stale
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = bg.left;
      try_add(l.prev, bg.left);
      try_add(bg.left, l.next);
    }
    for (int32_t i = b; i != -1; i = sym[i].next) {
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
  };

  const auto n = static_cast<int32_t>(sym.size());
  int32_t seg = 0;
  for (int32_t i = 1; i <= n; ++i) {
    if (i < n && v.may_join(static_cast<uint8_t>(text[sym[i].start - 1]), static_cast<uint8_t>(text[sym[i].start])))
      continue;
    merge_segment(seg, i);
    seg = i;
  }
}

}  // namespace gaacrt::tok
