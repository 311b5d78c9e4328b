#include <pybind11/pybind11.h>

#include <string>
#include <thread>

#include "bindings/registry.hpp"
#include "core/parallel.hpp"

namespace py = pybind11;

namespace rapidscore::bindings {

void register_build_info(py::module_& m) {
    m.attr("__version__") = RAPIDSCORE_VERSION;
    m.def(
        "build_info",
        []() {
            py::dict info;
            info["version"] = RAPIDSCORE_VERSION;
            info["compiler"] = std::string(__VERSION__);
            info["cplusplus"] = static_cast<long>(__cplusplus);
#ifdef NDEBUG
            info["debug"] = false;
#else
            info["debug"] = true;
#endif
            info["hardware_threads"] = resolve_threads(0);
            return info;
        },
        "Compiler, C++ standard and threading facts of the compiled core.");
}

}  // namespace rapidscore::bindings
