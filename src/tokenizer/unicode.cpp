// unicode.cpp — code-point classes, llama.cpp-compatible UTF-8 decoding, GPT-2 byte map
// (shared/spec/gguf.md §4.1–4.2). See unicode.h for the contracts.
#include "unicode.h"

#include <array>
#include <map>

#include "unicode_tables.h"

namespace gaacrt::tok {
namespace {

constexpr uint32_t kMaxCpt = 0x110000;

// A two-stage lookup table built once from the generated ranges: stage1[cp >> 8] names a
// 256-entry block of flags; identical blocks (most of the planes) are stored once. ~100 KB
// instead of the 2.2 MB a flat array would take, and one extra load per lookup.
struct FlagTable {
  std::vector<uint16_t> stage1;  // (kMaxCpt >> 8): block index
  std::vector<uint16_t> blocks;  // (n_blocks, 256)

  FlagTable() {
    std::vector<uint16_t> flat(kMaxCpt, 0);
    constexpr size_t n = sizeof(tables::kCptRanges) / sizeof(tables::kCptRanges[0]);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t end = i + 1 < n ? tables::kCptRanges[i + 1].first : kMaxCpt;
      for (uint32_t cp = tables::kCptRanges[i].first; cp < end; ++cp) flat[cp] = tables::kCptRanges[i].cls;
    }
    for (uint32_t cp : tables::kWhiteSpace) flat[cp] |= CPT_WHITESPACE;

    std::map<std::vector<uint16_t>, uint16_t> seen;
    stage1.resize(kMaxCpt >> 8);
    for (uint32_t b = 0; b < (kMaxCpt >> 8); ++b) {
      std::vector<uint16_t> block(flat.begin() + b * 256, flat.begin() + (b + 1) * 256);
      auto it = seen.find(block);
      if (it == seen.end()) {
        const auto idx = static_cast<uint16_t>(blocks.size() / 256);
        blocks.insert(blocks.end(), block.begin(), block.end());
        it = seen.emplace(std::move(block), idx).first;
      }
      stage1[b] = it->second;
    }
  }
};

const FlagTable& flag_table() {
  static const FlagTable t;
  return t;
}

struct ByteMap {
  std::array<uint32_t, 256> cpt{};
  std::array<std::string, 256> utf8;
  std::array<int16_t, 324> inverse{};  // every mapped code point is < U+0144

  ByteMap() {
    inverse.fill(-1);
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      cpt[b] = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(utf8[b], cpt[b]);
      inverse[cpt[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

inline bool is_cont(uint8_t c) { return (c & 0xC0) == 0x80; }

}  // namespace

uint16_t cpt_flags(uint32_t cp) {
  if (cp >= kMaxCpt) return CPT_UNDEFINED;
  const FlagTable& t = flag_table();
  return t.blocks[static_cast<size_t>(t.stage1[cp >> 8]) * 256 + (cp & 0xFF)];
}

void utf8_to_cpts(std::string_view s, std::vector<uint32_t>& out, std::vector<uint32_t>* starts) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  out.reserve(out.size() + n);
  size_t i = 0;
  while (i < n) {
    const uint8_t c = p[i];
    uint32_t cp = kReplacementChar;
    size_t len = 1;
    // The lead byte alone decides the length; the continuation bytes must be 10xxxxxx. Values
    // are not range-checked (llama.cpp accepts overlongs and surrogates), except above U+10FFFF.
    if (c < 0x80) {
      cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      if (i + 1 < n && is_cont(p[i + 1])) { cp = ((c & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu); len = 2; }
    } else if ((c & 0xF0) == 0xE0) {
      if (i + 2 < n && is_cont(p[i + 1]) && is_cont(p[i + 2])) {
        cp = ((c & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6) | (p[i + 2] & 0x3Fu);
        len = 3;
      }
    } else if ((c & 0xF8) == 0xF0) {
      if (i + 3 < n && is_cont(p[i + 1]) && is_cont(p[i + 2]) && is_cont(p[i + 3])) {
        const uint32_t v = ((c & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12) | ((p[i + 2] & 0x3Fu) << 6) |
                           (p[i + 3] & 0x3Fu);
        if (v < kMaxCpt) { cp = v; len = 4; }
      }
    }
    if (starts) starts->push_back(static_cast<uint32_t>(i));
    out.push_back(cp);
    i += len;
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int utf8_complete_len(const uint8_t* s, size_t n) {
  if (n == 0) return 0;
  const uint8_t c = s[0];
  if (c < 0x80) return 1;
  // Allowed range of the second byte per lead byte (RFC 3629 table): this is what rules out
  // overlongs (E0 80.., F0 80..), surrogates (ED A0..) and code points past U+10FFFF (F4 90..).
  int len;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k < len; ++k) {
    if (static_cast<size_t>(k) >= n) return 0;  // a valid prefix so far: wait for more bytes
    const uint8_t b = s[k];
    if (k == 1 ? (b < lo || b > hi) : !is_cont(b)) return -k;  // the k bytes before are the bad subpart
  }
  return len;
}

uint32_t byte_to_cpt(uint8_t b) { return byte_map().cpt[b]; }

const std::string& byte_to_utf8(uint8_t b) { return byte_map().utf8[b]; }

int cpt_to_byte(uint32_t cp) {
  const ByteMap& m = byte_map();
  return cp < m.inverse.size() ? m.inverse[cp] : -1;
}

}  // namespace gaacrt::tok
