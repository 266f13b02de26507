// mmap_file.cpp — MappedFile for POSIX and Windows.
#include "mmap_file.h"

#include <cerrno>
#include <cstring>

#include "error.h"

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace gaacrt {

#if defined(_WIN32)
MappedFile::MappedFile(const std::string& path) : path_(path) {
  HANDLE f = CreateFileA(path.c_str(), GENERIC_READ, FILE_SHARE_READ, nullptr, OPEN_EXISTING,
                         FILE_ATTRIBUTE_NORMAL, nullptr);
  if (f == INVALID_HANDLE_VALUE) throw Error("io", "open_failed", strfmt("%s: cannot open file", path.c_str()));
  LARGE_INTEGER sz;
  GetFileSizeEx(f, &sz);
  size_ = static_cast<size_t>(sz.QuadPart);
  file_ = f;
  if (size_ == 0) return;
  HANDLE m = CreateFileMappingA(f, nullptr, PAGE_READONLY, 0, 0, nullptr);
  if (!m) { CloseHandle(f); throw Error("io", "mmap_failed", strfmt("%s: cannot map file", path.c_str())); }
  mapping_ = m;
  data_ = static_cast<const uint8_t*>(MapViewOfFile(m, FILE_MAP_READ, 0, 0, 0));
}
MappedFile::~MappedFile() {
  if (data_) UnmapViewOfFile(data_);
  if (mapping_) CloseHandle(mapping_);
  if (file_) CloseHandle(file_);
}
#else
MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error("io", "open_failed", strfmt("%s: cannot open file: %s", path.c_str(), std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("io", "open_failed", strfmt("%s: not a regular file", path.c_str()));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw Error("io", "mmap_failed", strfmt("%s: mmap failed: %s", path.c_str(), std::strerror(err)));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}
MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}
#endif

}  // namespace gaacrt
