// gguf_reader.cpp — parse and validate the GGUF header, metadata and tensor table.
//
// Layout (shared/spec/gguf.md §1.1): magic "GGUF" · u32 version · u64 n_tensors · u64 n_kv ·
// n_kv × (string key, u32 type, value) · n_tensors × (string name, u32 n_dims, u64 ne[n_dims],
// u32 ggml_type, u64 offset) · zero padding to `alignment` · tensor data.
#include "gguf_reader.h"

#include <algorithm>
#include <cstring>

#include "../common/mmap_file.h"

namespace gaacrt {
namespace {

constexpr int kMaxArrayDepth = 8;  // nested arrays deeper than this are refused, not recursed

// Sequential reader over one mapping; every read is bounds-checked.
class Cursor {
 public:
  Cursor(const MappedFile& f) : p_(f.data()), size_(f.size()), path_(f.path()) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return p_ + pos_; }

  [[noreturn]] void fail(const char* kind, const std::string& what) const {
    throw GGUFError(kind, strfmt("%s: %s", path_.c_str(), what.c_str()));
  }
  void need(size_t n, const std::string& section) const {
    if (n > remaining())
      fail("truncated", strfmt("truncated in %s: need %zu bytes at offset %zu, file size %zu",
                               section.c_str(), n, pos_, size_));
  }
  template <typename T>
  T read(const std::string& section) {
    need(sizeof(T), section);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));  // little-endian host assumed (checked at build)
    pos_ += sizeof(T);
    return v;
  }
  void skip(size_t n, const std::string& section) { need(n, section); pos_ += n; }

  std::string_view read_string(const std::string& section) {
    const uint64_t len = read<uint64_t>(section);
    if (len > remaining())
      fail("string_past_eof", strfmt("%s: string length %llu at offset %zu past end of file (size %zu)",
                                     section.c_str(), (unsigned long long)len, pos_ - 8, size_));
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }
  // A count of elements, each at least `min_bytes` long, must fit in what is left of the file.
  void check_count(uint64_t count, size_t min_bytes, const std::string& what) const {
    if (min_bytes > 0 && count > remaining() / min_bytes)
      fail("count_past_eof", strfmt("%s = %llu cannot fit in the %zu bytes left at offset %zu",
                                    what.c_str(), (unsigned long long)count, remaining(), pos_));
  }

 private:
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

size_t scalar_size(GGUFValueType t) {
  switch (t) {
    case GGUFValueType::UINT8: case GGUFValueType::INT8: case GGUFValueType::BOOL: return 1;
    case GGUFValueType::UINT16: case GGUFValueType::INT16: return 2;
    case GGUFValueType::UINT32: case GGUFValueType::INT32: case GGUFValueType::FLOAT32: return 4;
    case GGUFValueType::UINT64: case GGUFValueType::INT64: case GGUFValueType::FLOAT64: return 8;
    default: return 0;  // STRING, ARRAY: variable
  }
}

bool valid_value_type(uint32_t t) { return t <= 12; }

template <typename T>
T load(const uint8_t* p) { T v; std::memcpy(&v, p, sizeof v); return v; }

void read_scalar(const uint8_t* p, GGUFValueType t, GGUFValue& v) {
  switch (t) {
    case GGUFValueType::UINT8: v.u = load<uint8_t>(p); v.i = (int64_t)v.u; break;
    case GGUFValueType::INT8: v.i = load<int8_t>(p); break;
    case GGUFValueType::UINT16: v.u = load<uint16_t>(p); v.i = (int64_t)v.u; break;
    case GGUFValueType::INT16: v.i = load<int16_t>(p); break;
    case GGUFValueType::UINT32: v.u = load<uint32_t>(p); v.i = (int64_t)v.u; break;
    case GGUFValueType::INT32: v.i = load<int32_t>(p); break;
    case GGUFValueType::UINT64: v.u = load<uint64_t>(p); v.i = (int64_t)v.u; break;
    case GGUFValueType::INT64: v.i = load<int64_t>(p); break;
    case GGUFValueType::FLOAT32: v.f = load<float>(p); break;
    case GGUFValueType::FLOAT64: v.f = load<double>(p); break;
    case GGUFValueType::BOOL: v.u = load<uint8_t>(p); v.i = (int64_t)v.u; break;  // int_at() reads .i
    default: break;
  }
}

GGUFValue read_value(Cursor& c, GGUFValueType t, const std::string& where, int depth) {
  GGUFValue v;
  v.type = t;
  if (t == GGUFValueType::STRING) {
    v.str = c.read_string(where);
    return v;
  }
  if (t != GGUFValueType::ARRAY) {
    const size_t n = scalar_size(t);
    c.need(n, where);
    read_scalar(c.here(), t, v);
    c.skip(n, where);
    return v;
  }
  if (depth >= kMaxArrayDepth)
    c.fail("nesting_too_deep", strfmt("%s: arrays nested deeper than %d levels", where.c_str(), kMaxArrayDepth));
  const uint32_t et = c.read<uint32_t>(where);
  if (!valid_value_type(et))
    c.fail("bad_value_type", strfmt("%s: unknown array element type %u", where.c_str(), et));
  v.elem = static_cast<GGUFValueType>(et);
  v.count = c.read<uint64_t>(where);
  // Minimum encoded size of one element: a string or array header is 8/12 bytes.
  const size_t min_elem = v.elem == GGUFValueType::STRING ? 8 : v.elem == GGUFValueType::ARRAY ? 12 : scalar_size(v.elem);
  c.check_count(v.count, min_elem, where + " array count");
  if (v.elem == GGUFValueType::STRING) {
    v.strings.reserve(static_cast<size_t>(v.count));
    for (uint64_t k = 0; k < v.count; ++k) v.strings.push_back(c.read_string(where));
  } else if (v.elem == GGUFValueType::ARRAY) {
    v.items.reserve(static_cast<size_t>(v.count));
    for (uint64_t k = 0; k < v.count; ++k)
      v.items.push_back(read_value(c, GGUFValueType::ARRAY, where, depth + 1));
  } else {
    v.raw = c.here();
    c.skip(static_cast<size_t>(v.count) * min_elem, where);
  }
  return v;
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// "dir/name-00001-of-00003.gguf" -> ("dir/name", 1, 3); count 0 when the name is not a split.
// Parsed by hand: the suffix has a fixed shape, and std::regex recurses per character of the
// "(.*)" prefix, which long paths could turn into a stack overflow.
struct SplitName { std::string prefix; int no = 0, count = 0; };
SplitName parse_split_name(const std::string& path) {
  static constexpr char kShape[] = "-#####-of-#####.gguf";  // # = a decimal digit
  constexpr size_t n = sizeof(kShape) - 1;
  SplitName s;
  if (path.size() < n) return s;
  const size_t base = path.size() - n;
  int no = 0, count = 0;
  for (size_t k = 0; k < n; ++k) {
    const char c = path[base + k];
    if (kShape[k] != '#') {
      if (c != kShape[k]) return s;
    } else if (c < '0' || c > '9') {
      return s;
    } else {
      int& field = k < 7 ? no : count;
      field = field * 10 + (c - '0');
    }
  }
  s.prefix = path.substr(0, base);
  s.no = no;
  s.count = count;
  return s;
}

}  // namespace

const char* gguf_value_type_name(GGUFValueType t) {
  static const char* names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                "bool", "string", "array", "uint64", "int64", "float64"};
  const uint32_t i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "unknown";
}

// ---- GGUFValue accessors ----------------------------------------------------------------

bool GGUFValue::is_integer() const {
  switch (type) {
    case GGUFValueType::UINT8: case GGUFValueType::INT8: case GGUFValueType::UINT16:
    case GGUFValueType::INT16: case GGUFValueType::UINT32: case GGUFValueType::INT32:
    case GGUFValueType::UINT64: case GGUFValueType::INT64: return true;
    default: return false;
  }
}

static std::string wrong_type(std::string_view key, const char* want, GGUFValueType got) {
  return strfmt("metadata '%.*s': expected %s, found %s", (int)key.size(), key.data(), want,
                gguf_value_type_name(got));
}

int64_t GGUFValue::as_int(std::string_view key) const {
  if (!is_integer()) throw GGUFError("wrong_type", wrong_type(key, "an integer", type));
  return i;
}
double GGUFValue::as_float(std::string_view key) const {
  if (is_float()) return f;
  if (is_integer()) return static_cast<double>(i);
  throw GGUFError("wrong_type", wrong_type(key, "a number", type));
}
bool GGUFValue::as_bool(std::string_view key) const {
  if (type == GGUFValueType::BOOL) return u != 0;
  if (is_integer()) return i != 0;
  throw GGUFError("wrong_type", wrong_type(key, "a bool", type));
}
std::string_view GGUFValue::as_string(std::string_view key) const {
  if (type != GGUFValueType::STRING) throw GGUFError("wrong_type", wrong_type(key, "a string", type));
  return str;
}
double GGUFValue::number_at(uint64_t k) const {
  GGUFValue e;
  e.type = elem;
  read_scalar(raw + k * scalar_size(elem), elem, e);
  if (e.is_float()) return e.f;
  return elem == GGUFValueType::UINT64 ? static_cast<double>(e.u) : static_cast<double>(e.i);
}
int64_t GGUFValue::int_at(uint64_t k) const {
  GGUFValue e;
  e.type = elem;
  read_scalar(raw + k * scalar_size(elem), elem, e);
  return e.is_float() ? static_cast<int64_t>(e.f) : e.i;
}

// ---- GGUFFile -------------------------------------------------------------------------------

GGUFFile::GGUFFile(const std::string& path) : path_(path) {
  const SplitName split = parse_split_name(path);
  files_.push_back(std::make_unique<MappedFile>(path));
  parse_part(0, &kv_);
  for (size_t k = 0; k < kv_.size(); ++k) kv_index_.emplace(kv_[k].first, k);

  // A split model (llama.cpp's gguf-split): every part carries split.no (0-based) and
  // split.count; the first part also holds the model's metadata and split.tensors.count.
  const int64_t count = get_int("split.count", 1);
  if (count > 1) {
    const int64_t first_no = get_int("split.no", 0);
    if (first_no != 0)
      throw GGUFError("split_mismatch", strfmt("%s: this is part %lld of %lld of a split model (split.no = "
                                               "%lld); open the first part, '<name>-00001-of-%05lld.gguf'",
                                               path.c_str(), (long long)first_no + 1, (long long)count,
                                               (long long)first_no, (long long)count));
    if (split.count != count || split.no != 1)
      throw GGUFError("split_mismatch", strfmt("%s: split.count = %lld, but the file is not named "
                                               "'<name>-00001-of-%05lld.gguf', so its other parts cannot be found",
                                               path.c_str(), (long long)count, (long long)count));
    for (int no = 2; no <= count; ++no) {
      const std::string part_path = strfmt("%s-%05d-of-%05d.gguf", split.prefix.c_str(), no, (int)count);
      try {
        files_.push_back(std::make_unique<MappedFile>(part_path));
      } catch (const Error& e) {
        throw GGUFError("split_mismatch", strfmt("%s: part %d of %lld of the split model cannot be opened: %s",
                                                 path.c_str(), no, (long long)count, e.what()));
      }
      std::vector<std::pair<std::string, GGUFValue>> part_kv;
      parse_part(static_cast<uint32_t>(files_.size() - 1), &part_kv);
      int64_t part_no = -1, part_count = -1;
      for (auto& kv : part_kv) {
        if (kv.first == "split.no") part_no = kv.second.as_int("split.no");
        if (kv.first == "split.count") part_count = kv.second.as_int("split.count");
      }
      if (part_no != no - 1)
        throw GGUFError("split_mismatch", strfmt("%s: split.no = %lld, expected %d", part_path.c_str(),
                                                 (long long)part_no, no - 1));
      if (part_count != count)
        throw GGUFError("split_mismatch", strfmt("%s: split.count = %lld, but the first part says %lld",
                                                 part_path.c_str(), (long long)part_count, (long long)count));
    }
    const int64_t expect = get_int("split.tensors.count", static_cast<int64_t>(tensors_.size()));
    if (expect != static_cast<int64_t>(tensors_.size()))
      throw GGUFError("split_mismatch", strfmt("%s: split.tensors.count = %lld but the parts hold %zu tensors",
                                               path.c_str(), (long long)expect, tensors_.size()));
  }
}

GGUFFile::~GGUFFile() = default;
GGUFFile::GGUFFile(GGUFFile&&) noexcept = default;
GGUFFile& GGUFFile::operator=(GGUFFile&&) noexcept = default;

uint64_t GGUFFile::file_size() const {
  uint64_t s = 0;
  for (auto& f : files_) s += f->size();
  return s;
}

void GGUFFile::parse_part(uint32_t part, std::vector<std::pair<std::string, GGUFValue>>* kv_out) {
  const MappedFile& file = *files_[part];
  Cursor c(file);

  // Header.
  c.need(4, "header");
  if (std::memcmp(c.here(), "GGUF", 4) != 0) {
    const uint8_t* m = c.here();
    c.fail("bad_magic", strfmt("bad magic %02x %02x %02x %02x (expected 'GGUF')", m[0], m[1], m[2], m[3]));
  }
  c.skip(4, "header");
  const uint32_t version = c.read<uint32_t>("header");
  if ((version & 0xFFFFu) == 0 && version != 0)
    c.fail("endianness_mismatch", strfmt("version field 0x%08x: a big-endian file (or a byte-swapped "
                                         "version); only little-endian GGUF is supported", version));
  if (version != 2 && version != 3)
    c.fail("unsupported_version", strfmt("unsupported GGUF version %u (2 and 3 are supported)", version));
  if (part == 0) version_ = version;
  const uint64_t n_tensors = c.read<uint64_t>("header");
  const uint64_t n_kv = c.read<uint64_t>("header");
  // Smallest possible encodings: a KV pair is 8 (key length) + 4 (type) + 1 byte; a tensor info
  // is 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset).
  c.check_count(n_kv, 13, "n_kv");
  c.check_count(n_tensors, 24, "n_tensors");

  // Metadata.
  std::unordered_map<std::string_view, bool> seen_keys;
  uint32_t alignment = 32;
  kv_out->reserve(static_cast<size_t>(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string section = strfmt("metadata entry %llu", (unsigned long long)k);
    const std::string_view key = c.read_string(section);
    const std::string where = section + " '" + std::string(key) + "'";
    if (!seen_keys.emplace(key, true).second)
      c.fail("duplicate_key", strfmt("duplicate metadata key '%.*s'", (int)key.size(), key.data()));
    const uint32_t t = c.read<uint32_t>(where);
    if (!valid_value_type(t)) c.fail("bad_value_type", strfmt("%s: unknown value type %u", where.c_str(), t));
    GGUFValue v = read_value(c, static_cast<GGUFValueType>(t), where, 0);
    if (key == "general.alignment") {
      if (!v.is_integer() || v.i <= 0 || v.i > (1 << 30) || (v.i & (v.i - 1)) != 0)
        c.fail("bad_alignment", strfmt("general.alignment must be a power of two (got %s %lld)",
                                       gguf_value_type_name(v.type), (long long)v.i));
      alignment = static_cast<uint32_t>(v.i);
    }
    kv_out->emplace_back(std::string(key), std::move(v));
  }
  if (part == 0) alignment_ = alignment;

  // Tensor infos.
  const size_t first = tensors_.size();
  for (uint64_t k = 0; k < n_tensors; ++k) {
    const std::string section = strfmt("tensor info %llu", (unsigned long long)k);
    GGUFTensorInfo ti;
    ti.name = std::string(c.read_string(section));
    const std::string where = "tensor '" + ti.name + "'";
    ti.n_dims = c.read<uint32_t>(where);
    if (ti.n_dims > 4) c.fail("too_many_dims", strfmt("%s: %u dimensions (at most 4)", where.c_str(), ti.n_dims));
    int64_t n_el = 1;
    for (uint32_t d = 0; d < ti.n_dims; ++d) {
      const int64_t ne = c.read<int64_t>(where);
      if (ne < 0) c.fail("bad_shape", strfmt("%s: negative dimension ne[%u] = %lld", where.c_str(), d, (long long)ne));
      ti.ne[d] = ne;
      if (__builtin_mul_overflow(n_el, ne, &n_el))
        c.fail("element_count_overflow", strfmt("%s: element count overflows 64 bits", where.c_str()));
    }
    const uint32_t type = c.read<uint32_t>(where);
    const TypeTraits* tr = type_traits(type);
    if (!tr) c.fail("unknown_tensor_type", strfmt("%s: unknown tensor type %u", where.c_str(), type));
    ti.type = static_cast<GGMLType>(type);
    if (ti.ne[0] % tr->block_size != 0)
      c.fail("bad_shape", strfmt("%s: ne[0] = %lld is not a multiple of the %s block size %u", where.c_str(),
                                 (long long)ti.ne[0], tr->name, tr->block_size));
    uint64_t nbytes;
    if (__builtin_mul_overflow(static_cast<uint64_t>(n_el / tr->block_size), tr->type_size, &nbytes))
      c.fail("element_count_overflow", strfmt("%s: byte size overflows 64 bits", where.c_str()));
    ti.nbytes = nbytes;
    ti.offset = c.read<uint64_t>(where);
    if (ti.offset % alignment != 0)
      c.fail("misaligned_offset", strfmt("%s: offset %llu is not a multiple of the alignment %u", where.c_str(),
                                         (unsigned long long)ti.offset, alignment));
    ti.split = part;
    if (tensor_index_.count(ti.name))
      c.fail("duplicate_tensor_name", strfmt("duplicate tensor name '%s'", ti.name.c_str()));
    tensor_index_.emplace(ti.name, tensors_.size());
    tensors_.push_back(std::move(ti));
  }

  const uint64_t data_offset = align_up(c.pos(), alignment);
  if (part == 0) data_offset_ = data_offset;
  part_data_offset_.push_back(data_offset);
  check_tensor_data(part, first);
}

// Every tensor's bytes lie inside the file, and no two tensors share a byte.
void GGUFFile::check_tensor_data(uint32_t part, size_t first) {
  const MappedFile& file = *files_[part];
  const uint64_t base = part_data_offset_[part];
  std::vector<size_t> order;
  for (size_t k = first; k < tensors_.size(); ++k) {
    GGUFTensorInfo& t = tensors_[k];
    uint64_t begin, end;
    if (__builtin_add_overflow(base, t.offset, &begin) || __builtin_add_overflow(begin, t.nbytes, &end) ||
        end > file.size())
      throw GGUFError("tensor_data_past_eof",
                      strfmt("%s: tensor '%s': data [%llu, %llu + %llu) past end of file (size %zu)",
                             file.path().c_str(), t.name.c_str(), (unsigned long long)base,
                             (unsigned long long)t.offset, (unsigned long long)t.nbytes, file.size()));
    t.data = file.data() + begin;
    order.push_back(k);
  }
  // Sorted by offset, a tensor overlaps an earlier one iff it starts before the furthest end
  // seen so far (not just the previous tensor's end: an empty or short tensor in between would
  // hide the overlap). Empty tensors occupy no bytes and overlap nothing.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  const GGUFTensorInfo* furthest = nullptr;  // the tensor whose data ends last so far
  for (size_t k : order) {
    const GGUFTensorInfo& cur = tensors_[k];
    if (cur.nbytes == 0) continue;
    if (furthest && cur.offset < furthest->offset + furthest->nbytes)
      throw GGUFError("tensor_overlap", strfmt("%s: tensor '%s' [%llu, %llu) overlaps tensor '%s' [%llu, %llu)",
                                               file.path().c_str(), cur.name.c_str(), (unsigned long long)cur.offset,
                                               (unsigned long long)(cur.offset + cur.nbytes), furthest->name.c_str(),
                                               (unsigned long long)furthest->offset,
                                               (unsigned long long)(furthest->offset + furthest->nbytes)));
    if (!furthest || cur.offset + cur.nbytes > furthest->offset + furthest->nbytes) furthest = &cur;
  }
}

const GGUFValue* GGUFFile::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

int64_t GGUFFile::get_int(std::string_view key, int64_t dflt) const {
  const GGUFValue* v = find(key);
  return v ? v->as_int(key) : dflt;
}
double GGUFFile::get_float(std::string_view key, double dflt) const {
  const GGUFValue* v = find(key);
  return v ? v->as_float(key) : dflt;
}
bool GGUFFile::get_bool(std::string_view key, bool dflt) const {
  const GGUFValue* v = find(key);
  return v ? v->as_bool(key) : dflt;
}
std::string GGUFFile::get_string(std::string_view key, std::string_view dflt) const {
  const GGUFValue* v = find(key);
  return std::string(v ? v->as_string(key) : dflt);
}

const GGUFTensorInfo* GGUFFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace gaacrt
