#include <pybind11/pybind11.h>

#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

#include "bindings/registry.hpp"
#include "core/greedy_match.hpp"
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
    m.attr("max_threads") = kMaxThreads;
    m.def("matching_isa", []() { return std::string(matching_isa_name()); },
          "The instruction set the matching kernel runs on this CPU (chosen at run time): "
          "'x86-64-v4' (AVX-512), 'x86-64-v3' (AVX2+FMA) or 'baseline'.");
    // Test hook: throws the C++ exception of the given kind, so tests can check which Python
    // exception each kind becomes (module.cpp, translate_exceptions).
    m.def(
        "_throw_for_test",
        [](const std::string& kind) {
            if (kind == "invalid_argument") throw std::invalid_argument("test: invalid_argument");
            if (kind == "out_of_range") throw std::out_of_range("test: out_of_range");
            if (kind == "length_error") throw std::length_error("test: length_error");
            if (kind == "bad_alloc") throw std::bad_alloc();
            if (kind == "system_error")
                throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                        "test: system_error");
            if (kind == "overflow_error") throw std::overflow_error("test: overflow_error");
            if (kind == "runtime_error") throw std::runtime_error("test: runtime_error");
            throw std::invalid_argument("unknown kind '" + kind + "'");
        },
        py::arg("kind"));
}

}  // namespace rapidscore::bindings
