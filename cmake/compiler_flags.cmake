# compiler_flags.cmake — warnings, optimisation and the bit-exactness rule.
#
# DESIGN.md "What must stay true": code whose results are promised bit-exact (dequantization,
# attention) must not have a*b+c contracted into an FMA behind our back. We apply
# -ffp-contract=off to the whole core: the SIMD kernels that want FMAs use explicit intrinsics.
if(MSVC)
  add_compile_options(/W3 /fp:precise)
else()
  add_compile_options(-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
endif()

function(gaacrt_strict_fp target)
  if(NOT MSVC)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX,C>:-ffp-contract=off -fno-fast-math>)
  endif()
endfunction()

if(SKBUILD)
  set(GAACRT_INSTALL_LIBDIR gaacrt)
  set(GAACRT_INSTALL_INCLUDEDIR gaacrt/include)
else()
  include(GNUInstallDirs)
  set(GAACRT_INSTALL_LIBDIR ${CMAKE_INSTALL_LIBDIR})
  set(GAACRT_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
endif()
