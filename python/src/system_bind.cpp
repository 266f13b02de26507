// system_bind.cpp — version, build configuration and hardware queries.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "backend/devices.h"
#include "bindings.h"
#include "cpu/cpu_features.h"

namespace nb = nanobind;

namespace gaacrt::py {

void bind_system(nb::module_& m) {
  m.attr("__version__") = GAACRT_PY_VERSION;
  m.def("cpu_isas", [] {
        std::vector<std::string> out;
        for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::AVX2, cpu::Isa::NEON})
          if (cpu::isa_available(isa)) out.push_back(cpu::isa_name(isa));
        return out;
      }, "SIMD paths compiled in and supported by this CPU, slowest first");
  m.def("compiled_backends", [] { return compiled_backends(); },
        "backends built into this library, e.g. ['cpu', 'cuda']");
  m.def("cuda_devices", [](const std::string& backend) {
        nb::list out;
        for (const DeviceInfo& d : list_devices(backend)) {
          nb::dict e;
          e["index"] = d.index;
          e["name"] = d.name;
          e["total_memory"] = d.total_memory;
          e["compute_capability"] = nb::make_tuple(d.cc_major, d.cc_minor);
          e["multiprocessors"] = d.multiprocessors;
          out.append(e);
        }
        return out;
      }, nb::arg("backend") = "cuda",
      "CUDA devices visible to the CUDA backend (empty when it is not built or no GPU is present); "
      "backend='cuda-emulated': the CUDA emulation's one device");
  m.def("cuda_unavailable_reason", [] { return device_unavailable_reason("cuda"); },
        "why no CUDA device can be used here ('' when one can)");
}

}  // namespace gaacrt::py
