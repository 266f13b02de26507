# metal_emulation.cmake — the Metal kernels compiled as C++ under the MSL emulation, with the
# backend's portable host logic, into the gaacrt library: the backend "metal-emulated" (tests).
#
# Each kernels/*.metal file is compiled as C++17 with -D__METAL_VERSION__ and the emulation's
# include directory first (its metal_stdlib stands in for Apple's), like any other core source
# otherwise (-ffp-contract=off included). Strict mode (C++14, no std::, distinct address spaces)
# is a separate clang syntax check run by tests/test_metal_strict.py.
set(_metal_dir ${CMAKE_CURRENT_LIST_DIR})
file(GLOB _metal_kernels CONFIGURE_DEPENDS ${_metal_dir}/kernels/*.metal)
file(GLOB _metal_emulation CONFIGURE_DEPENDS ${_metal_dir}/emulation/*.cpp)
set_source_files_properties(${_metal_kernels} PROPERTIES
  LANGUAGE CXX
  COMPILE_OPTIONS "-xc++;-Wno-attributes"
  COMPILE_DEFINITIONS "__METAL_VERSION__=300;GAACRT_MSL_EMULATION"
  INCLUDE_DIRECTORIES "${_metal_dir}/emulation")
target_sources(gaacrt PRIVATE ${_metal_kernels} ${_metal_emulation})
include(${_metal_dir}/metal_host.cmake)
