#include <pybind11/pybind11.h>

#include <system_error>

#include "bindings/registry.hpp"

namespace py = pybind11;

namespace {

// C++ exceptions become Python exceptions by kind. pybind11 already maps std::invalid_argument,
// std::domain_error, std::length_error -> ValueError, std::out_of_range -> IndexError,
// std::bad_alloc -> MemoryError, std::overflow_error -> OverflowError, any other std::exception
// -> RuntimeError. Added here: std::system_error (thread or resource limits) -> OSError with its
// errno, so that it reads like the same failure in Python code.
void translate_exceptions(std::exception_ptr p) {
    try {
        if (p) std::rethrow_exception(p);
    } catch (const std::system_error& e) {
        py::object error = py::module_::import("builtins").attr("OSError")(e.code().value(), e.what());
        PyErr_SetObject(PyExc_OSError, error.ptr());
    }
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "rapidscore native kernels (C++17, threads inside kernels with the GIL released). "
              "Called through the wrappers in rapidscore.kernels; typed in rapidscore/_core.pyi.";
    m.attr("__version__") = RAPIDSCORE_VERSION;
    py::register_exception_translator(&translate_exceptions);
    py::module_ build_info = m.def_submodule("build_info", "Compiler, C++ standard and threading facts of this build.");
    rapidscore::bindings::register_build_info(build_info);
    py::module_ matching = m.def_submodule("matching", "BERTScore greedy cosine matching over a flat token store.");
    rapidscore::bindings::register_matching(matching);
    py::module_ alignment = m.def_submodule("alignment", "One-to-one alignment of gold and predicted spans.");
    rapidscore::bindings::register_alignment(alignment);
    py::module_ phrases = m.def_submodule("phrases", "Fuzzy refusal-phrase matching (SELECT keyword detector).");
    rapidscore::bindings::register_phrases(phrases);
    py::module_ resampling = m.def_submodule("resampling", "Paired bootstrap and randomization sums (rapidscore.compare).");
    rapidscore::bindings::register_resampling(resampling);
}
