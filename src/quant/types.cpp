// types.cpp — the table behind type_traits(): ggml.h ids, block sizes and byte sizes.
#include "types.h"

#include <cstdio>

namespace gaacrt {
namespace {

struct Entry { uint32_t id; TypeTraits traits; };

// Sizes from ggml-common.h. Q8_1 is 36 bytes there (fp16 d and s); the gguf Python package
// still lists 40, but Q8_1 never appears in a model file.
constexpr Entry kTypes[] = {
  {0, {"f32", 1, 4, true}},        {1, {"f16", 1, 2, true}},
  {2, {"q4_0", 32, 18, true}},     {3, {"q4_1", 32, 20, true}},
  {6, {"q5_0", 32, 22, true}},     {7, {"q5_1", 32, 24, true}},
  {8, {"q8_0", 32, 34, true}},     {9, {"q8_1", 32, 36, false}},
  {10, {"q2_K", 256, 84, false}},  {11, {"q3_K", 256, 110, false}},
  {12, {"q4_K", 256, 144, true}},  {13, {"q5_K", 256, 176, true}},
  {14, {"q6_K", 256, 210, true}},  {15, {"q8_K", 256, 292, false}},
  {16, {"iq2_xxs", 256, 66, false}}, {17, {"iq2_xs", 256, 74, false}},
  {18, {"iq3_xxs", 256, 98, false}}, {19, {"iq1_s", 256, 50, false}},
  {20, {"iq4_nl", 32, 18, true}},  {21, {"iq3_s", 256, 110, false}},
  {22, {"iq2_s", 256, 82, false}}, {23, {"iq4_xs", 256, 136, true}},
  {24, {"i8", 1, 1, false}},       {25, {"i16", 1, 2, false}},
  {26, {"i32", 1, 4, false}},      {27, {"i64", 1, 8, false}},
  {28, {"f64", 1, 8, false}},      {29, {"iq1_m", 256, 56, false}},
  {30, {"bf16", 1, 2, true}},      {34, {"tq1_0", 256, 54, false}},
  {35, {"tq2_0", 256, 66, false}}, {39, {"mxfp4", 32, 17, false}},
  {40, {"nvfp4", 64, 36, false}},  {41, {"q1_0", 128, 18, false}},
};

}  // namespace

const TypeTraits* type_traits(uint32_t id) {
  for (const Entry& e : kTypes)
    if (e.id == id) return &e.traits;
  return nullptr;
}

const char* type_name(GGMLType t) {
  if (const TypeTraits* tr = type_traits(t)) return tr->name;
  static thread_local char buf[24];
  std::snprintf(buf, sizeof buf, "type#%u", static_cast<uint32_t>(t));
  return buf;
}

}  // namespace gaacrt
