// pretokenize.h — the regex pre-tokenizers of byte-level BPE, as hand-written matchers over code
// points (shared/spec/gguf.md §4.1). Each `tokenizer.ggml.pre` value selects a list of regexes;
// each regex re-splits every piece produced so far and text it does not match stays a piece of
// its own. The matchers reproduce exactly what these regexes (and llama.cpp's matchers for them)
// produce, without a regex engine:
//   GPT2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//   SMOLLM \p{N}  then GPT2                         (each digit is a piece of its own)
//   LLAMA3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   QWEN2  LLAMA3 with \p{N} instead of \p{N}{1,3}
//   DEFAULT [\p{P}\$\+<=>\^~\|]+  then GPT2  then \p{N}+  then [0-9][0-9][0-9]
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace gaacrt::tok {

enum class PreType { DEFAULT, GPT2, SMOLLM, LLAMA3, QWEN2 };

const char* pre_type_name(PreType t);

// Splits the code points cpts[0..n) (flags[i] = cpt_flags(cpts[i])) into pieces and writes the
// length of each piece, in code points, to `lens` (cleared first). The lengths sum to n.
void pretokenize(PreType type, const uint32_t* cpts, const uint16_t* flags, size_t n,
                 std::vector<uint32_t>& lens);

}  // namespace gaacrt::tok
