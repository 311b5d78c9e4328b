// Each area of the native core binds its functions in its own register_*.cpp file, into its own
// submodule of _core (named after the Python package that wraps it, see module.cpp).
#pragma once
#include <pybind11/pybind11.h>

namespace rapidscore::bindings {
void register_build_info(pybind11::module_& m);  // _core.build_info: compiler and build facts
void register_matching(pybind11::module_& m);    // _core.matching: BERTScore greedy cosine matching
void register_alignment(pybind11::module_& m);   // _core.alignment: DMBertA span alignment
void register_phrases(pybind11::module_& m);     // _core.phrases: refusal phrase / keyword matching
void register_resampling(pybind11::module_& m);  // _core.resampling: paired bootstrap / randomization sums
}  // namespace rapidscore::bindings
