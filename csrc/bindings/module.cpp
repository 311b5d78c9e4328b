#include <pybind11/pybind11.h>

#include "bindings/registry.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
    m.doc() = "rapidscore native kernels (C++17, threads inside kernels with the GIL released). "
              "Called through the wrappers in rapidscore.kernels; typed in rapidscore/_core.pyi.";
    m.attr("__version__") = RAPIDSCORE_VERSION;
    py::module_ build_info = m.def_submodule("build_info", "Compiler, C++ standard and threading facts of this build.");
    rapidscore::bindings::register_build_info(build_info);
    py::module_ matching = m.def_submodule("matching", "BERTScore greedy cosine matching over a flat token store.");
    rapidscore::bindings::register_matching(matching);
    py::module_ alignment = m.def_submodule("alignment", "One-to-one alignment of gold and predicted spans.");
    rapidscore::bindings::register_alignment(alignment);
    py::module_ phrases = m.def_submodule("phrases", "Fuzzy refusal-phrase matching (SELECT keyword detector).");
    rapidscore::bindings::register_phrases(phrases);
}
