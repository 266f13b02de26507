// encoders.h — the two subword encoders, applied to one raw-text fragment (special tokens have
// already been cut out): byte-level BPE (spec §4.2) and SentencePiece (spec §4.3).
// Internal to src/tokenizer; callers use Tokenizer (tokenizer.h).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "vocab.h"

namespace gaacrt::tok {

// Pre-tokenizes `text` with the vocabulary's regexes, then merges each piece's bytes by rank.
void bpe_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

// Merges the UTF-8 characters of `text` (already space-escaped to U+2581) by score; symbols
// that are not tokens fall back to byte tokens.
void spm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

}  // namespace gaacrt::tok
