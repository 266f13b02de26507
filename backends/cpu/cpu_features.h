// cpu_features.h — which SIMD paths this CPU can run (queried once, at first use).
#pragma once

namespace gaacrt::cpu {

enum class Isa { Scalar = 0, AVX2 = 1, NEON = 2 };

bool cpu_has_avx2();   // AVX2 + FMA + F16C, and the OS saves the YMM state
Isa best_isa();        // the fastest path compiled in and supported here
const char* isa_name(Isa isa);
bool isa_available(Isa isa);  // compiled in and supported by this CPU

}  // namespace gaacrt::cpu
