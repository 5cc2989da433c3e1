// Reading a binary file in pieces with typed errors, shared by the .npy and safetensors
// readers: every failure is an IoError "[component] PATH: expected …, got …".
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "rlx/error.h"

namespace rlx::detail {

class BinaryReader {
 public:
  BinaryReader(const char* component, const std::string& path)
      : component_(component), path_(path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail("expected a file, got a directory");
    errno = 0;
    in_.open(path, std::ios::binary);
    if (!in_) fail(str_cat("expected a readable file, got: ", std::strerror(errno)));
    in_.seekg(0, std::ios::end);
    auto end = in_.tellg();
    in_.seekg(0);
    if (end < 0) fail("expected a seekable file, got one whose size cannot be read");
    size_ = uint64_t(end);
  }

  uint64_t size() const { return size_; }
  void seek(uint64_t offset) { in_.seekg(std::streamoff(offset)); }
  void read(void* dst, size_t n) {
    if (n && !in_.read(static_cast<char*>(dst), std::streamsize(n)))
      fail(str_cat("expected to read ", n, " bytes, got a read error"));
  }
  [[noreturn]] void fail(const std::string& what) const {
    rlx::fail<IoError>(component_, path_, ": ", what);
  }

 private:
  const char* component_;
  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
};

}  // namespace rlx::detail
