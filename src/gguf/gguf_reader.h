// gguf_reader.h — a validating, memory-mapped reader of GGUF v2/v3 files (shared/spec/gguf.md §1).
//
// Every count, length and offset is checked against the end of the mapping before it is used,
// so a corrupt file produces a GGUFError naming the problem instead of a crash. The kinds:
//   bad_magic, unsupported_version, endianness_mismatch, truncated, count_past_eof,
//   string_past_eof, bad_value_type, nesting_too_deep, duplicate_key, bad_alignment,
//   too_many_dims, bad_shape, element_count_overflow, unknown_tensor_type,
//   duplicate_tensor_name, misaligned_offset, tensor_data_past_eof, tensor_overlap,
//   split_mismatch (and io errors from MappedFile).
// Gaps between tensors are allowed (the format does not forbid them); overlaps are not.
// Split models (`name-00001-of-00003.gguf`) open as one file: metadata from the first part,
// tensors from all parts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../common/error.h"
#include "../quant/types.h"

namespace gaacrt {

class MappedFile;

enum class GGUFValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* gguf_value_type_name(GGUFValueType t);

// One metadata value. Scalars are widened (u/i/f); strings point into the mapping.
// An array keeps its element type and count; numeric elements stay in the file (read them with
// the accessors), strings are listed as views, nested arrays as child values.
struct GGUFValue {
  GGUFValueType type = GGUFValueType::UINT8;
  uint64_t u = 0;            // unsigned scalars and BOOL
  int64_t i = 0;             // signed scalars
  double f = 0.0;            // FLOAT32 / FLOAT64
  std::string_view str;      // STRING
  GGUFValueType elem = GGUFValueType::UINT8;  // ARRAY: element type
  uint64_t count = 0;                         // ARRAY: number of elements
  const uint8_t* raw = nullptr;               // ARRAY of numbers/bools: little-endian elements
  std::vector<std::string_view> strings;      // ARRAY of STRING
  std::vector<GGUFValue> items;               // ARRAY of ARRAY

  bool is_array() const { return type == GGUFValueType::ARRAY; }
  bool is_integer() const;
  bool is_float() const { return type == GGUFValueType::FLOAT32 || type == GGUFValueType::FLOAT64; }
  // Conversions; a value of the wrong kind throws GGUFError("wrong_type") naming `key`.
  int64_t as_int(std::string_view key = {}) const;
  double as_float(std::string_view key = {}) const;  // integers convert too
  bool as_bool(std::string_view key = {}) const;
  std::string_view as_string(std::string_view key = {}) const;
  // Numeric array element k as double / int64 (element type checked by the caller).
  double number_at(uint64_t k) const;
  int64_t int_at(uint64_t k) const;
};

struct GGUFTensorInfo {
  std::string name;
  GGMLType type = GGMLType::F32;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ggml order: ne[0] is contiguous; unused dims are 1
  uint64_t offset = 0;           // from the start of its file's data section
  uint64_t nbytes = 0;
  uint32_t split = 0;            // which part of a split model holds it
  const uint8_t* data = nullptr; // into the mapping

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

class GGUFFile {
 public:
  explicit GGUFFile(const std::string& path);
  ~GGUFFile();
  GGUFFile(GGUFFile&&) noexcept;
  GGUFFile& operator=(GGUFFile&&) noexcept;

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // of the first part
  uint64_t file_size() const;                            // all parts together
  const std::string& path() const { return path_; }
  size_t n_splits() const { return files_.size(); }

  // Metadata in file order, and lookup by key (nullptr when absent).
  const std::vector<std::pair<std::string, GGUFValue>>& metadata() const { return kv_; }
  const GGUFValue* find(std::string_view key) const;
  // Typed lookups with a default for an absent key; a present key of the wrong type throws.
  int64_t get_int(std::string_view key, int64_t dflt) const;
  double get_float(std::string_view key, double dflt) const;
  bool get_bool(std::string_view key, bool dflt) const;
  std::string get_string(std::string_view key, std::string_view dflt = {}) const;
  std::string architecture() const { return get_string("general.architecture"); }

  const std::vector<GGUFTensorInfo>& tensors() const { return tensors_; }
  const GGUFTensorInfo* find_tensor(std::string_view name) const;

 private:
  void parse_part(uint32_t part, std::vector<std::pair<std::string, GGUFValue>>* kv_out);
  void check_tensor_data(uint32_t part, size_t first);

  std::string path_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<uint64_t> part_data_offset_;
  std::vector<std::pair<std::string, GGUFValue>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<GGUFTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace gaacrt
