# cuda_emulation.cmake — the CUDA backend's sources compiled as C++ under the CUDA emulation, into
# the gaacrt library: the backend "cuda-emulated" (tests off a GPU; emulation/cuda_emu.h says what
# is emulated and what is not).
#
# Every backends/cuda source (.cu and .cpp) is compiled as C++17 with the emulation's folder first
# on the include path (its cuda_runtime.h, cuda_bf16.h and cuda_fp16.h stand in for the toolkit's)
# and cuda_emu.h force-included, as nvcc includes the runtime header in every .cu. The namespace
# gaacrt::cuda becomes gaacrt::cuda_emulated (-Dcuda=...), so that these objects and the real CUDA
# backend's link into one library side by side.
set(_cuda_dir ${CMAKE_CURRENT_LIST_DIR})
file(GLOB _cuda_emu_sources CONFIGURE_DEPENDS ${_cuda_dir}/*.cu ${_cuda_dir}/sm90a/*.cu ${_cuda_dir}/*.cpp)
add_library(gaacrt_cuda_emulated OBJECT ${_cuda_emu_sources} ${_cuda_dir}/emulation/cuda_emu.cpp
            ${_cuda_dir}/emulation/cuda_emu_mma.cpp)
set_source_files_properties(${_cuda_emu_sources} PROPERTIES LANGUAGE CXX)
target_include_directories(gaacrt_cuda_emulated BEFORE PRIVATE ${_cuda_dir}/emulation)
target_include_directories(gaacrt_cuda_emulated PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/backends
                           ${PROJECT_SOURCE_DIR}/include ${_cuda_dir})
# The emulated device is compute capability 9.0 and the emulation emulates wgmma (kernels/wgmma.cuh):
# sm90a/'s kernels are built here too, and attention.cu takes them as on an H100.
target_compile_definitions(gaacrt_cuda_emulated PRIVATE __CUDACC__ cuda=cuda_emulated GAACRT_BUILDING_LIBRARY
                           GAACRT_CUDA_SM90A=1)
# Kernels read and write through reinterpret_cast as CUDA code does: no type-based aliasing
# assumptions. Same float rules as the rest of the library (no contraction).
target_compile_options(gaacrt_cuda_emulated PRIVATE -xc++ -include ${_cuda_dir}/emulation/cuda_emu.h
                       -fno-strict-aliasing -ffp-contract=off -Wno-unknown-pragmas -Wno-attributes)
set_target_properties(gaacrt_cuda_emulated PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_link_libraries(gaacrt PRIVATE gaacrt_cuda_emulated ${CMAKE_DL_LIBS})
