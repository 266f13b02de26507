// dequant_dump.cpp — `dequant_dump TYPE_ID N IN OUT`: dequantizes N elements of raw blocks from
// file IN with the portable dequant_block() code and writes N float32 to OUT.
// tests/test_neon_qemu.py cross-compiles it for aarch64, runs it under qemu on random blocks and
// checks the floats bit-for-bit against gguf.quants.dequantize — the dequantization rule of
// DESIGN.md held on an ARM build, not just on the x86 one.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cpu/dequantize.h"
#include "quant/types.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s TYPE_ID N IN OUT\n", argv[0]);
    return 2;
  }
  const auto type = static_cast<gaacrt::GGMLType>(std::atoi(argv[1]));
  const long long n = std::atoll(argv[2]);
  const gaacrt::TypeTraits* tr = gaacrt::type_traits(type);
  if (!tr || n <= 0 || n % tr->block_size != 0) {
    std::fprintf(stderr, "dequant_dump: bad type id %s or element count %lld\n", argv[1], n);
    return 2;
  }
  std::vector<unsigned char> raw(gaacrt::row_bytes(type, n));
  std::vector<float> out(static_cast<size_t>(n));
  FILE* in = std::fopen(argv[3], "rb");
  if (!in || std::fread(raw.data(), 1, raw.size(), in) != raw.size()) {
    std::fprintf(stderr, "dequant_dump: cannot read %zu bytes from %s\n", raw.size(), argv[3]);
    return 1;
  }
  std::fclose(in);
  gaacrt::cpu::dequantize_row(type, raw.data(), out.data(), n);
  FILE* o = std::fopen(argv[4], "wb");
  if (!o || std::fwrite(out.data(), sizeof(float), out.size(), o) != out.size()) {
    std::fprintf(stderr, "dequant_dump: cannot write %s\n", argv[4]);
    return 1;
  }
  std::fclose(o);
  return 0;
}
