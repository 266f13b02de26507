# metal_host.cmake — the Metal backend's portable host logic (host/*.cpp: planner, MetalBackendBase)
# in the gaacrt library; included by both the real backend (CMakeLists.txt, macOS) and the
# emulated one (metal_emulation.cmake), added once.
include_guard(GLOBAL)
file(GLOB _metal_host_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/host/*.cpp)
target_sources(gaacrt PRIVATE ${_metal_host_sources})
