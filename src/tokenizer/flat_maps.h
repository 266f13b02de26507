// flat_maps.h — the two lookups the encoders do per symbol pair, as open-addressing hash tables:
// token text -> id (SentencePiece tries every adjacent pair) and (left id, right id) -> merge
// rule (byte-level BPE). std::unordered_map costs three dependent cache misses per probe (bucket,
// node, string); here a probe is one slot read plus one compare against a contiguous text blob,
// which made SentencePiece ~2x faster on a 1 MB text.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace gaacrt::tok {

inline uint64_t hash_bytes(const char* p, size_t n) {
  // A multiply-xorshift mix over 8-byte words (splitmix64 constants); good spread for short keys.
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(n) * 0xFF51AFD7ED558CCDull);
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  if (n) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  return h ^ (h >> 32);
}

inline uint64_t hash_u64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

inline size_t table_size_for(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap <<= 1;  // load factor <= 1/2: short linear probes
  return cap;
}

// Token text -> id over a fixed vocabulary. Texts are copied into one blob.
class TokenIndex {
 public:
  // Inserts ids 0..n-1; returns the id already holding a text when a duplicate is found, else -1.
  int32_t build(const std::vector<std::string>& texts) {
    offs_.assign(1, 0);
    blob_.clear();
    for (const std::string& t : texts) {
      blob_ += t;
      offs_.push_back(static_cast<uint32_t>(blob_.size()));
    }
    slots_.assign(table_size_for(texts.size()), Slot{0, -1});
    mask_ = slots_.size() - 1;
    for (size_t i = 0; i < texts.size(); ++i) {
      const uint64_t h = hash_bytes(texts[i].data(), texts[i].size());
      size_t s = h & mask_;
      for (;; s = (s + 1) & mask_) {
        if (slots_[s].id < 0) {
          slots_[s] = Slot{static_cast<uint32_t>(h >> 32), static_cast<int32_t>(i)};
          break;
        }
        if (slots_[s].tag == static_cast<uint32_t>(h >> 32) && text(slots_[s].id) == texts[i]) {
          dup_ = static_cast<int32_t>(i);
          return slots_[s].id;
        }
      }
    }
    return -1;
  }
  int32_t duplicate() const { return dup_; }

  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(key.data(), key.size());
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t s = h & mask_;; s = (s + 1) & mask_) {
      const Slot& e = slots_[s];
      if (e.id < 0) return -1;
      if (e.tag == tag && text(e.id) == key) return e.id;
    }
  }

 private:
  struct Slot {
    uint32_t tag;  // high half of the hash: most mismatches never touch the text
    int32_t id;    // -1 = empty
  };
  std::string_view text(int32_t id) const { return std::string_view(blob_).substr(offs_[id], offs_[id + 1] - offs_[id]); }

  std::string blob_;
  std::vector<uint32_t> offs_;  // (n + 1) start of each text in blob_
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int32_t dup_ = -1;
};

// 64-bit key -> value, insert-if-absent (the first insertion of a key wins).
template <typename V>
class U64Map {
 public:
  void reserve(size_t n) {
    keys_.assign(table_size_for(n), kEmpty);
    vals_.assign(keys_.size(), V{});
    mask_ = keys_.size() - 1;
  }
  bool emplace(uint64_t key, const V& v) {  // key must not be kEmpty; table sized by reserve()
    for (size_t s = hash_u64(key) & mask_;; s = (s + 1) & mask_) {
      if (keys_[s] == key) return false;
      if (keys_[s] == kEmpty) {
        keys_[s] = key;
        vals_[s] = v;
        ++size_;
        return true;
      }
    }
  }
  const V* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (size_t s = hash_u64(key) & mask_;; s = (s + 1) & mask_) {
      if (keys_[s] == key) return &vals_[s];
      if (keys_[s] == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // (-1, -1): never a pair of token ids
  std::vector<uint64_t> keys_;
  std::vector<V> vals_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace gaacrt::tok
