// pybind11 layer of the BERTScore greedy matching kernel (core/greedy_match.hpp).
// Everything the kernel trusts (shapes, offsets, indices, finiteness) is checked here with the
// GIL held, on private copies of the index arrays (arrays.hpp, owned_copy); the kernel then runs
// with the GIL released. The float arrays are read in place: another thread changing them can
// only change the scores, never make the kernel read out of bounds.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "bindings/arrays.hpp"
#include "bindings/registry.hpp"
#include "core/greedy_match.hpp"

namespace py = pybind11;

namespace rapidscore::bindings {
namespace {

struct Store {
    FloatArray emb;
    IndexArray offsets;
    FloatArray weights;
    int64_t n_tokens = 0, dim = 0, n_sentences = 0;
};

Store validate_store(const py::handle& embeddings, const py::handle& offsets, const py::handle& weights) {
    Store s;
    float max_abs = 0.0f;
    s.emb = float_array(embeddings, "embeddings", 2, &max_abs);
    s.n_tokens = s.emb.shape(0);
    s.dim = s.emb.shape(1);
    if (s.dim < 1) throw py::value_error("embeddings must have at least one column (shape (T, D), D >= 1)");
    // Finite rows can still overflow float32 dot products (1e30 everywhere gives P = inf and
    // F = NaN): refused, as a non-finite value is.
    double squared_norm = 0.0;
    const auto rows = static_cast<std::size_t>(s.n_tokens), dim = static_cast<std::size_t>(s.dim);
    const std::size_t big = rapidscore::first_oversized_row(s.emb.data(), rows, dim, max_abs, &squared_norm);
    if (big != rows) {
        char norm[32], limit[32];
        std::snprintf(norm, sizeof norm, "%.3g", std::sqrt(squared_norm));
        std::snprintf(limit, sizeof limit, "%.3g", std::sqrt(rapidscore::kMaxRowSquaredNorm));
        throw py::value_error("embeddings row " + std::to_string(big) + " has L2 norm " + norm +
                              ": its dot products overflow float32 (the rows must be L2-normalised token "
                              "embeddings, norm 1; the largest norm accepted is " + limit + ")");
    }
    s.offsets = index_array(offsets, "offsets", 1);
    if (s.offsets.size() < 1)
        throw py::value_error("offsets must hold n_sentences + 1 values (at least one, e.g. [0])");
    s.n_sentences = s.offsets.size() - 1;
    const int64_t* o = s.offsets.data();
    if (o[0] < 0) throw py::value_error("offsets[0] = " + std::to_string(o[0]) + " is negative");
    for (int64_t i = 0; i < s.n_sentences; ++i)
        if (o[i + 1] < o[i])
            throw py::value_error("offsets must be non-decreasing: offsets[" + std::to_string(i + 1) +
                                  "] = " + std::to_string(o[i + 1]) + " < offsets[" + std::to_string(i) +
                                  "] = " + std::to_string(o[i]));
    if (o[s.n_sentences] > s.n_tokens)
        throw py::value_error("offsets[-1] = " + std::to_string(o[s.n_sentences]) +
                              " exceeds the number of embedding rows " + std::to_string(s.n_tokens));
    s.weights = float_array(weights, "weights", 1);
    if (s.weights.size() != s.n_tokens)
        throw py::value_error("weights has " + std::to_string(s.weights.size()) +
                              " values but embeddings has " + std::to_string(s.n_tokens) + " rows");
    return s;
}

void check_indices(const int64_t* idx, int64_t count, int64_t n_sentences, const char* name, int64_t stride = 1) {
    for (int64_t k = 0; k < count; ++k) {
        const int64_t v = idx[k];
        if (v < 0 || v >= n_sentences)
            throw py::index_error(std::string(name) + " entry " + std::to_string(k / stride) +
                                  (stride > 1 ? ", column " + std::to_string(k % stride) : std::string()) +
                                  " = " + std::to_string(v) + " is not a sentence index in [0, " +
                                  std::to_string(n_sentences) + ")");
    }
}

py::tuple greedy_match_py(const py::object& embeddings, const py::object& offsets, const py::object& weights,
                          const py::object& pairs_obj, const py::object& threads_obj, const py::object& floors_obj) {
    const int num_threads = thread_count(threads_obj, "num_threads", false);
    Store s = validate_store(embeddings, offsets, weights);
    IndexArray pairs = index_array(pairs_obj, "pairs", 2);
    if (pairs.shape(1) != 2)
        throw py::value_error("pairs must have shape (m, 2) of (candidate, reference) indices, got second dimension " +
                              std::to_string(pairs.shape(1)));
    const int64_t m = pairs.shape(0);
    check_indices(pairs.data(), 2 * m, s.n_sentences, "pairs", 2);
    py::array_t<uint8_t, py::array::c_style | py::array::forcecast> floors;
    if (!floors_obj.is_none()) {
        py::array f = as_array(floors_obj, "floors");
        if (f.dtype().kind() != 'b')
            throw py::type_error("floors must be a boolean array, got dtype " + dtype_name(f));
        if (f.ndim() != 2 || f.shape(0) != m || f.shape(1) != 2)
            throw py::value_error("floors must have shape (m, 2) like pairs");
        auto view = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>::ensure(f);
        if (!view) throw py::error_already_set();
        floors = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>(view.request());  // private copy
    }
    const uint8_t* floors_ptr = floors_obj.is_none() ? nullptr : floors.data();
    py::array_t<double> P(m), R(m), F(m);
    double *pp = P.mutable_data(), *rp = R.mutable_data(), *fp = F.mutable_data();
    {
        py::gil_scoped_release release;
        greedy_match_pairs(s.emb.data(), s.dim, s.offsets.data(), s.n_sentences, s.weights.data(), pairs.data(), m,
                           pp, rp, fp, num_threads, floors_ptr);
    }
    return py::make_tuple(P, R, F);
}

py::tuple pairwise_match_py(const py::object& embeddings, const py::object& offsets, const py::object& weights,
                            const py::object& candidates_obj, const py::object& references_obj,
                            const py::object& threads_obj) {
    const int num_threads = thread_count(threads_obj, "num_threads", false);
    Store s = validate_store(embeddings, offsets, weights);
    IndexArray cands = index_array(candidates_obj, "candidates", 1);
    IndexArray refs = index_array(references_obj, "references", 1);
    const int64_t nc = cands.size(), nr = refs.size();
    check_indices(cands.data(), nc, s.n_sentences, "candidates");
    check_indices(refs.data(), nr, s.n_sentences, "references");
    py::array_t<double> P({nc, nr}), R({nc, nr}), F({nc, nr});
    double *pp = P.mutable_data(), *rp = R.mutable_data(), *fp = F.mutable_data();
    {
        py::gil_scoped_release release;
        greedy_match_pairwise(s.emb.data(), s.dim, s.offsets.data(), s.n_sentences, s.weights.data(), cands.data(),
                              nc, refs.data(), nr, pp, rp, fp, num_threads);
    }
    return py::make_tuple(P, R, F);
}

}  // namespace

void register_matching(py::module_& m) {
    m.def("greedy_match", &greedy_match_py, py::arg("embeddings"), py::arg("offsets"), py::arg("weights"),
          py::arg("pairs"), py::arg("num_threads") = py::int_(0), py::arg("floors") = py::none(),
          "BERTScore greedy cosine matching of (candidate, reference) sentence pairs.\n\n"
          "embeddings (T, D) floating, offsets (n + 1,) integer, weights (T,) floating, pairs (m, 2) integer,\n"
          "floors None or (m, 2) bool: start pair k's precision / recall token maxima at 0 (bert-score padding).\n"
          "Returns (P, R, F) float64 arrays of shape (m,). See rapidscore.kernels.matching.greedy_match.");
    m.def("pairwise_match", &pairwise_match_py, py::arg("embeddings"), py::arg("offsets"), py::arg("weights"),
          py::arg("candidates"), py::arg("references"), py::arg("num_threads") = py::int_(0),
          "BERTScore greedy matching of every candidate against every reference.\n\n"
          "Returns (P, R, F) float64 arrays of shape (len(candidates), len(references)).\n"
          "See rapidscore.kernels.matching.pairwise_match.");
}

}  // namespace rapidscore::bindings
