#include <pybind11/pybind11.h>

#include "bindings/registry.hpp"

PYBIND11_MODULE(_core, m) {
    m.doc() = "rapidscore native kernels (C++17, threads inside kernels with the GIL released)";
    rapidscore::bindings::register_build_info(m);
    rapidscore::bindings::register_matching(m);
    rapidscore::bindings::register_alignment(m);
    rapidscore::bindings::register_phrases(m);
}
