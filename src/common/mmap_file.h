// mmap_file.h — a read-only memory mapping of a whole file (POSIX mmap / Windows views).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace gaacrt {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws Error("io", ...) naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
#if defined(_WIN32)
  void* file_ = nullptr;
  void* mapping_ = nullptr;
#endif
};

}  // namespace gaacrt
