// launcher.h — how the emulation calls a kernel compiled from a .metal file: a thunk per kernel
// instance, made from the kernel's own function type, binds the arguments by place (buffers, then
// threadgroup blocks, then the four position parameters every kernel ends with; kernels/common.h),
// and a registrar enters it under its host name. Included by msl_shim.h in run mode only.
#pragma once
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "runtime.h"

namespace msl_emu {

// A buffer or threadgroup argument from its address: pointers as they are, references (the
// `constant Args& a [[buffer(0)]]` of every kernel) by dereferencing.
template <typename P>
struct BindArg {
  static_assert(std::is_pointer<P>::value, "a kernel's buffer/threadgroup argument must be a pointer or a reference");
  static P from(void* p) { return static_cast<P>(p); }
};
template <typename T>
struct BindArg<T&> {
  static T& from(void* p) { return *static_cast<T*>(p); }
};

template <typename F, F fn>
struct Thunk;

template <typename... P, void (*fn)(P...)>
struct Thunk<void (*)(P...), fn> {
  static constexpr int N = (int)sizeof...(P);
  static_assert(N >= 4, "a kernel ends with the four position parameters (kernels/common.h)");
  using Params = std::tuple<P...>;
  static_assert(std::is_same<typename std::tuple_element<N - 4, Params>::type, metal::uint3>::value &&
                    std::is_same<typename std::tuple_element<N - 3, Params>::type, metal::uint>::value &&
                    std::is_same<typename std::tuple_element<N - 2, Params>::type, metal::uint>::value &&
                    std::is_same<typename std::tuple_element<N - 1, Params>::type, metal::uint>::value,
                "a kernel ends with (uint3 tgpig, uint tiitg, uint sgitg, uint tiisg) (kernels/common.h)");

  template <size_t I>
  static typename std::tuple_element<I, Params>::type arg(void* const* args, const ThreadPos& p) {
    using Q = typename std::tuple_element<I, Params>::type;
    if constexpr (I == (size_t)N - 4) return metal::uint3{p.tg[0], p.tg[1], p.tg[2]};
    else if constexpr (I == (size_t)N - 3) return p.tiitg;
    else if constexpr (I == (size_t)N - 2) return p.sgitg;
    else if constexpr (I == (size_t)N - 1) return p.tiisg;
    else return BindArg<Q>::from(args[I]);
  }
  template <size_t... I>
  static void call(void* const* args, const ThreadPos& p, std::index_sequence<I...>) {
    fn(arg<I>(args, p)...);
  }
  static void run(void* const* args, const ThreadPos& p) { call(args, p, std::make_index_sequence<N>{}); }
};

struct KernelRegistrar {
  KernelRegistrar(const char* name, KernelThunk thunk, int n_params) { register_kernel({name, thunk, n_params}); }
};

}  // namespace msl_emu

#define MSL_EMU_CAT2(a, b) a##b
#define MSL_EMU_CAT(a, b) MSL_EMU_CAT2(a, b)
// kernels/common.h's GAACRT_KERNEL(name, fn<...>) in run mode.
#define MSL_EMU_REGISTER_KERNEL(name, ...)                                                               \
  static const ::msl_emu::KernelRegistrar MSL_EMU_CAT(msl_emu_kernel_, __LINE__)(                        \
      name, &::msl_emu::Thunk<decltype(&__VA_ARGS__), &__VA_ARGS__>::run,                                 \
      ::msl_emu::Thunk<decltype(&__VA_ARGS__), &__VA_ARGS__>::N);
