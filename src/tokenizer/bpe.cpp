// bpe.cpp — byte-level BPE (shared/spec/gguf.md §4.2).
//
// A pre-token's bytes start as one symbol each. Every adjacent pair that has a merge rule goes
// into a min-heap ordered by (rank, left position); the best pair is merged, its neighbours'
// pairs are pushed, and stale entries (a side already merged away) are skipped when popped.
// The result is the same as llama.cpp's and HF tokenizers' rank-ordered merging.
//
// Why ids instead of text: a byte's printable form (GPT-2 byte map) and every merge result are
// vocabulary tokens, so merge rules are looked up by (left id, right id) without building
// strings. Rules that name a non-token (the file allows it) are still honoured by text.
#include <algorithm>

#include "encoders.h"
#include "unicode.h"

namespace gaacrt::tok {
namespace {

struct Symbol {
  uint32_t start, len;  // bytes of the pre-token; len 0 = merged into its left neighbour
  int32_t id;           // token whose text this symbol spells, or kNoToken
  int32_t prev, next;   // neighbours in the chain, -1 at the ends
};

struct Candidate {
  int32_t rank;
  int32_t left, right;  // symbol indices
  uint32_t len;         // bytes of left + right when pushed: detects stale entries
  int32_t result;       // token of the merged text, or kNoToken
};

// std::push_heap keeps the "largest" on top; make that the lowest rank, then leftmost.
struct PopsLater {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class WordEncoder {
 public:
  explicit WordEncoder(const Vocab& v) : v_(v) {}

  void encode(std::string_view word, std::vector<int32_t>& out) {
    // LLAMA3's ignore_merges: a pre-token that is itself a token is emitted whole, even when
    // the merge order would have produced something else.
    if (v_.ignore_merges) {
      if (int32_t id = v_.find(mapped(word)); id != kNoToken) { out.push_back(id); return; }
    }
    const auto n = static_cast<int32_t>(word.size());
    sym_.clear();
    for (int32_t i = 0; i < n; ++i)
      sym_.push_back({static_cast<uint32_t>(i), 1, v_.byte_token[static_cast<uint8_t>(word[i])], i - 1,
                      i + 1 < n ? i + 1 : -1});
    heap_.clear();
    for (int32_t i = 1; i < n; ++i) push_pair(word, i - 1, i);

    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), PopsLater());
      const Candidate c = heap_.back();
      heap_.pop_back();
      Symbol& l = sym_[c.left];
      Symbol& r = sym_[c.right];
      if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;  // stale
      l.len += r.len;
      l.id = c.result;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) sym_[r.next].prev = c.left;
      push_pair(word, l.prev, c.left);
      push_pair(word, c.left, l.next);
    }

    for (int32_t i = 0; i != -1; i = sym_[i].next) {
      const Symbol& s = sym_[i];
      if (s.id != kNoToken) { out.push_back(s.id); continue; }
      // Not a token (only possible with unusual vocabularies): llama.cpp looks up each byte of
      // the symbol's printable text as a one-byte token and drops the bytes it cannot find.
      for (char c : mapped(word.substr(s.start, s.len)))
        if (int32_t id = v_.find(std::string_view(&c, 1)); id != kNoToken) out.push_back(id);
    }
  }

 private:
  // The GPT-2 printable form of raw bytes: the text the vocabulary and merges are written in.
  const std::string& mapped(std::string_view bytes) {
    map_buf_.clear();
    for (char c : bytes) map_buf_ += byte_to_utf8(static_cast<uint8_t>(c));
    return map_buf_;
  }

  void push_pair(std::string_view word, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = sym_[left];
    const Symbol& r = sym_[right];
    Candidate c{0, left, right, l.len + r.len, kNoToken};
    if (l.id != kNoToken && r.id != kNoToken) {
      const MergeRule* rule = v_.merges.find((static_cast<uint64_t>(l.id) << 32) | static_cast<uint32_t>(r.id));
      if (!rule) return;
      c.rank = rule->rank;
      c.result = rule->result;
    } else {
      if (v_.merges_by_text.empty()) return;
      const std::string lt = mapped(word.substr(l.start, l.len));
      const std::string& rt = mapped(word.substr(r.start, r.len));
      c.rank = v_.merge_rank_by_text(lt, rt);
      if (c.rank < 0) return;
      c.result = v_.find(lt + rt);
    }
    heap_.push_back(c);
    std::push_heap(heap_.begin(), heap_.end(), PopsLater());
  }

  const Vocab& v_;
  std::vector<Symbol> sym_;
  std::vector<Candidate> heap_;
  std::string map_buf_;
};

}  // namespace

void bpe_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::vector<uint32_t> cps;
  utf8_to_cpts(text, cps);
  std::vector<uint16_t> flags(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) flags[i] = cpt_flags(cps[i]);
  std::vector<uint32_t> lens;
  pretokenize(v.pre, cps.data(), flags.data(), cps.size(), lens);

  // Pieces are re-encoded from their code points, so malformed input reaches the merges as the
  // U+FFFD it was decoded to (llama.cpp does the same).
  WordEncoder enc(v);
  std::string word;
  size_t pos = 0;
  for (uint32_t len : lens) {
    word.clear();
    for (size_t k = pos; k < pos + len; ++k) append_utf8(word, cps[k]);
    pos += len;
    enc.encode(word, out);
  }
}

}  // namespace gaacrt::tok
