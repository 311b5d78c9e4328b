// Each area of the native core binds its functions in its own register_*.cpp file.
#pragma once
#include <pybind11/pybind11.h>

namespace rapidscore::bindings {
void register_build_info(pybind11::module_& m);
void register_matching(pybind11::module_& m);   // BERTScore greedy cosine matching
void register_alignment(pybind11::module_& m);  // DMBertA span alignment
void register_phrases(pybind11::module_& m);    // refusal phrase / keyword matching
}  // namespace rapidscore::bindings
