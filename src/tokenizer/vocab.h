// vocab.h — a tokenizer vocabulary loaded from a GGUF file alone (shared/spec/gguf.md §4):
// token texts, types, scores, BPE merges, special ids, the add_bos/add_eos/add_space_prefix
// flags, the pre-tokenizer, the special-token list used for partitioning and the
// end-of-generation set, all derived the way llama.cpp's llama_vocab::impl::load derives them.
//
// Supported `tokenizer.ggml.model` values: "gpt2" (byte-level BPE) and "llama" (SentencePiece).
// Anything else, and an unknown `tokenizer.ggml.pre` for BPE, is
// Error("tokenizer", "unknown_tokenizer", ...) naming the value. A missing `pre` means "default".
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flat_maps.h"
#include "pretokenize.h"

namespace gaacrt {
class GGUFFile;
}

namespace gaacrt::tok {

constexpr int32_t kNoToken = -1;

enum class VocabType { BPE, SPM };

// Token attributes; the bit values are llama.h's llama_token_attr so that they can be compared
// with llama.cpp one to one. GGUF stores a token *type* (1 normal, 2 unknown, 3 control,
// 4 user-defined, 5 unused, 6 byte); the loader maps type -> attribute and then adjusts a few
// (CONTROL forced on end-of-generation texts, UNUSED on control tokens named "unused", ...).
enum TokenAttr : uint32_t {
  ATTR_UNDEFINED = 0,
  ATTR_UNKNOWN = 1u << 0,
  ATTR_UNUSED = 1u << 1,
  ATTR_NORMAL = 1u << 2,
  ATTR_CONTROL = 1u << 3,
  ATTR_USER_DEFINED = 1u << 4,
  ATTR_BYTE = 1u << 5,
  ATTR_NORMALIZED = 1u << 6,
  ATTR_LSTRIP = 1u << 7,  // a special token that eats the whitespace before it
  ATTR_RSTRIP = 1u << 8,  // ... after it
  ATTR_SINGLE_WORD = 1u << 9,
};

// A BPE merge rule between two vocabulary tokens: its rank and the token it produces.
struct MergeRule {
  int32_t rank;
  int32_t result;  // kNoToken when the concatenation is not itself a token
};

struct Vocab {
  VocabType type = VocabType::SPM;
  std::string model;     // tokenizer.ggml.model as written
  std::string pre_name;  // tokenizer.ggml.pre as written ("" when absent)
  PreType pre = PreType::DEFAULT;

  std::vector<std::string> text;   // (n_tokens) token text as stored (BPE: byte-mapped form)
  std::vector<float> score;        // (n_tokens) SPM merge scores; 0 when absent
  std::vector<uint32_t> attr;      // (n_tokens) TokenAttr bits
  std::vector<std::string> piece;  // (n_tokens) detokenized bytes of each token (special shown)

  // Special ids (kNoToken when absent).
  int32_t bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken, unk = kNoToken;
  int32_t sep = kNoToken, pad = kNoToken, mask = kNoToken, linefeed = kNoToken;
  int32_t fim_pre = kNoToken, fim_suf = kNoToken, fim_mid = kNoToken;
  int32_t fim_pad = kNoToken, fim_rep = kNoToken, fim_sep = kNoToken;

  bool add_bos = false, add_eos = false, add_space_prefix = false;
  bool escape_whitespaces = true;  // SPM: ' ' -> U+2581 before encoding
  bool clean_spaces = false;       // detokenize: " ." -> "." etc. (HF clean_up_tokenization_spaces)
  bool ignore_merges = false;      // LLAMA3: a whole pre-token that is a token skips merging

  std::vector<int32_t> special_tokens;  // CONTROL|USER_DEFINED|UNKNOWN, longest text first
  std::vector<int32_t> eog;             // end-of-generation ids, ascending

  // BPE: merges keyed by (left id << 32 | right id); merges naming a non-token side are kept
  // by text ("<len>:" left right) so that nothing in the file is lost.
  U64Map<MergeRule> merges;
  std::unordered_map<std::string, int32_t> merges_by_text;
  int32_t byte_token[256];  // BPE: token of the byte's mapped character; SPM: byte fallback token
  // SPM: bit (a << 8 | b) is set when bytes a, b occur consecutively in some token's text. Where
  // the last byte of one symbol and the first of the next form no such pair, no token can span
  // the two, so the merges on either side are independent and the text can be cut there.
  std::vector<uint64_t> byte_pairs;  // (65536 bits)
  bool may_join(uint8_t a, uint8_t b) const {
    const uint32_t k = (static_cast<uint32_t>(a) << 8) | b;
    return (byte_pairs[k >> 6] >> (k & 63)) & 1;
  }

  // Loads and validates; the result is immutable and shared by tokenizers and decoders.
  static std::shared_ptr<const Vocab> load(const GGUFFile& f);
  Vocab() = default;
  Vocab(const Vocab&) = delete;  // shared immutably; never copied
  Vocab& operator=(const Vocab&) = delete;

  size_t n_tokens() const { return text.size(); }
  int32_t find(std::string_view s) const { return index_.find(s); }
  bool is_eog(int32_t id) const;
  // Text of a token, or throws Error("tokenizer", "bad_token") naming the id and vocab size.
  const std::string& token_text(int32_t id) const;
  void check_id(int32_t id, const char* op) const;

  // BPE merge lookup by the two symbols' texts when at least one is not a token.
  int32_t merge_rank_by_text(std::string_view left, std::string_view right) const;

 private:
  TokenIndex index_;  // text -> id
  friend struct VocabLoader;
};

}  // namespace gaacrt::tok
