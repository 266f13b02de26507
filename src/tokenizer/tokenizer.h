// tokenizer.h — text <-> token ids for a GGUF model, matching llama.cpp's llama_tokenize /
// llama_token_to_piece / llama_detokenize (shared/spec/gguf.md §4), plus a streaming decoder.
//
// tokenize(text, add_special, parse_special):
//   1. special-token partition (§4.4): the texts of CONTROL, USER_DEFINED and UNKNOWN tokens are
//      cut out of the text, longest first, before any pre-tokenization. With parse_special =
//      false only USER_DEFINED tokens are cut (HF behaviour); "<|im_start|>" typed by a user is
//      then plain text, which is what prevents prompt injection.
//   2. each remaining fragment goes through BPE or SentencePiece (SPM prepends a space to a
//      fragment that starts the text or follows a special token when add_space_prefix is set);
//   3. with add_special, BOS is prepended when the vocabulary's add_bos is set and EOS appended
//      when add_eos is set.
//
// Malformed UTF-8 never throws or crashes and is handled as llama.cpp handles it: byte-level BPE
// decodes each invalid byte to U+FFFD (so it is tokenized as the replacement character, and
// decodes back as U+FFFD); SentencePiece keeps the raw bytes as byte-fallback tokens <0xXX> (so
// decode gives the original bytes back, except that a bad lead byte takes the bytes its length
// announces into the same symbol: an escaped space among them decodes as U+2581, not ' ').
// See utf8_to_cpts in unicode.h for the exact BPE rule.
//
// A Tokenizer is immutable once built: every method may run concurrently from many threads.
//
// The buffer forms (`tokenize(text, out, capacity, ...)`, `detokenize(ids, n, buf, capacity, ...)`)
// return the number written, or minus the size needed when the buffer is too small: the shape the
// C API exposes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vocab.h"

namespace gaacrt {
class GGUFFile;
}

namespace gaacrt::tok {

class Tokenizer {
 public:
  explicit Tokenizer(const GGUFFile& f);
  explicit Tokenizer(std::shared_ptr<const Vocab> vocab);

  const Vocab& vocab() const { return *vocab_; }
  std::shared_ptr<const Vocab> shared_vocab() const { return vocab_; }

  std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const;
  int32_t tokenize(std::string_view text, int32_t* out, int32_t capacity, bool add_special,
                   bool parse_special) const;

  // Bytes of one token. Control and unknown tokens give "" unless `special`; `lstrip` drops up
  // to that many leading spaces (SPM's add_space_prefix on the first token of a text).
  std::string token_to_piece(int32_t id, bool special, int lstrip = 0) const;

  // Bytes of a token sequence, as llama_detokenize: remove_special drops a leading BOS / trailing
  // EOS that add_bos / add_eos would have added; unparse_special renders control tokens' text;
  // the space add_space_prefix put before the first word is removed; vocabularies with
  // clean_spaces get HF's clean-up (" ." -> ".", " 's" -> "'s", ...).
  std::string detokenize(const int32_t* ids, size_t n, bool remove_special, bool unparse_special) const;
  int32_t detokenize(const int32_t* ids, size_t n, char* buf, int32_t capacity, bool remove_special,
                     bool unparse_special) const;

  bool is_eog(int32_t id) const { return vocab_->is_eog(id); }

 private:
  struct Fragment {
    int32_t token;        // kNoToken for raw text
    uint32_t off, len;    // raw text: bytes of the input
  };
  void partition(std::string_view text, bool parse_special, std::vector<Fragment>& frags) const;

  std::shared_ptr<const Vocab> vocab_;
  // Byte trie over all special-token texts, used to find which of them occur in a text before
  // running the (longest-first, exact) partition with only those.
  std::vector<std::vector<std::pair<uint8_t, int32_t>>> trie_next_;  // node -> (byte, child)
  std::vector<int32_t> trie_token_;                                  // node -> token ending here
  bool first_byte_[256] = {};
};

// Incremental detokenizer: feed tokens one at a time and get text that never ends in half a
// UTF-8 character. Incomplete sequences are held back until the next token completes them;
// bytes that can never form a character become U+FFFD (one per maximal invalid subpart, as
// Python's bytes.decode(errors="replace")). The concatenation of all push() results and flush()
// equals detokenize(all ids, remove_special=false, unparse_special=special) with invalid
// sequences replaced, except for clean_spaces vocabularies, whose clean-up is whole-text.
class StreamDecoder {
 public:
  explicit StreamDecoder(std::shared_ptr<const Vocab> vocab, bool special = false);
  std::string push(int32_t id);
  std::string flush();  // whatever is still held, incomplete sequences as U+FFFD
  size_t pending() const { return pending_.size(); }

 private:
  std::string take(bool final);
  std::shared_ptr<const Vocab> vocab_;
  bool special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace gaacrt::tok
