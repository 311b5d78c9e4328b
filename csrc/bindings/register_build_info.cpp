#include <pybind11/pybind11.h>

#include <string>

#include "bindings/registry.hpp"
#include "core/parallel.hpp"

namespace py = pybind11;

namespace rapidscore::bindings {

void register_build_info(py::module_& m) {
    m.attr("version") = RAPIDSCORE_VERSION;
    m.attr("compiler") = std::string(__VERSION__);
    m.attr("cplusplus") = static_cast<long>(__cplusplus);
#ifdef NDEBUG
    m.attr("debug") = false;
#else
    m.attr("debug") = true;
#endif
    // A function, not a constant: the machine that runs the module may differ from the one that built it.
    m.def("hardware_threads", []() { return resolve_threads(0); },
          "Threads the kernels start for num_threads=0 (std::thread::hardware_concurrency, at least 1).");
}

}  // namespace rapidscore::bindings
