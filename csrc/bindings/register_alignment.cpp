// pybind11 layer of the DMBertA / SemEval span alignment (csrc/core/align_spans.hpp).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "bindings/arrays.hpp"
#include "bindings/registry.hpp"
#include "core/align_spans.hpp"

namespace py = pybind11;

namespace rapidscore::bindings {
namespace {

// Checks one side's CSR layout and spans; raises ValueError/IndexError naming the record.
void validate_side(const char* side, const IndexArray& offsets, const IndexArray& start, const IndexArray& end,
                   const IndexArray* label) {
    const auto n_off = offsets.shape(0);
    if (n_off < 1) throw py::value_error(std::string(side) + "_offsets must hold n_records + 1 values");
    if (start.shape(0) != end.shape(0))
        throw py::value_error(std::string(side) + "_starts and " + side + "_ends differ in length");
    if (label && label->shape(0) != start.shape(0))
        throw py::value_error(std::string(side) + "_labels and " + side + "_starts differ in length");
    const std::int64_t* off = offsets.data();
    if (off[0] != 0) throw py::value_error(std::string(side) + "_offsets must start at 0");
    if (off[n_off - 1] != static_cast<std::int64_t>(start.shape(0)))
        throw py::value_error(std::string(side) + "_offsets must end at the number of spans (" +
                              std::to_string(start.shape(0)) + "), got " + std::to_string(off[n_off - 1]));
    for (py::ssize_t r = 0; r + 1 < n_off; ++r) {
        if (off[r + 1] < off[r])
            throw py::value_error(std::string(side) + "_offsets decrease at record " + std::to_string(r));
    }
    const std::int64_t* s = start.data();
    const std::int64_t* e = end.data();
    for (py::ssize_t r = 0; r + 1 < n_off; ++r) {
        for (std::int64_t k = off[r]; k < off[r + 1]; ++k) {
            if (s[k] < 0 || e[k] < s[k])
                throw py::value_error("record " + std::to_string(r) + ": " + side + " span " +
                                      std::to_string(k - off[r]) + " has invalid offsets (" + std::to_string(s[k]) +
                                      ", " + std::to_string(e[k]) + "); need 0 <= start <= end");
        }
    }
}

AlignScheme parse_scheme(const std::string& scheme) {
    if (scheme == "jaccard") return AlignScheme::Jaccard;
    if (scheme == "strict") return AlignScheme::Strict;
    if (scheme == "exact") return AlignScheme::Exact;
    if (scheme == "partial") return AlignScheme::Partial;
    if (scheme == "type") return AlignScheme::Type;
    throw py::value_error("scheme must be 'jaccard', 'strict', 'exact', 'partial' or 'type', got '" + scheme + "'");
}

AlignMethod parse_method(const std::string& method) {
    if (method == "auto") return AlignMethod::Auto;
    if (method == "dp") return AlignMethod::DynamicProgramme;
    if (method == "assignment") return AlignMethod::Assignment;
    throw py::value_error("method must be 'auto', 'dp' or 'assignment', got '" + method + "'");
}

py::tuple align_spans_batch(const py::handle& gold_offsets, const py::handle& gold_starts,
                            const py::handle& gold_ends, const py::handle& pred_offsets,
                            const py::handle& pred_starts, const py::handle& pred_ends,
                            const py::handle& gold_labels, const py::handle& pred_labels,
                            const py::handle& scheme_obj, const py::handle& method_obj,
                            const py::handle& min_jaccard_obj, const py::handle& min_overlap_percent_obj,
                            const py::handle& threads_obj) {
    const int n_threads = thread_count(threads_obj, "n_threads", true);
    const std::string scheme = str_arg(scheme_obj, "scheme"), method = str_arg(method_obj, "method");
    const double min_jaccard = real_arg(min_jaccard_obj, "min_jaccard");
    const double min_overlap_percent = real_arg(min_overlap_percent_obj, "min_overlap_percent");
    AlignOptions opt;
    opt.scheme = parse_scheme(scheme);
    opt.method = parse_method(method);
    if (!(min_jaccard >= 0.0 && min_jaccard <= 1.0)) throw py::value_error("min_jaccard must lie in [0, 1]");
    if (!(min_overlap_percent >= 0.0 && min_overlap_percent <= 100.0))
        throw py::value_error("min_overlap_percent must lie in [0, 100]");
    opt.min_jaccard = min_jaccard;
    opt.min_overlap_percent = min_overlap_percent;

    IndexArray g_off = int_array_like(gold_offsets, "gold_offsets");
    IndexArray g_s = int_array_like(gold_starts, "gold_starts"), g_e = int_array_like(gold_ends, "gold_ends");
    IndexArray p_off = int_array_like(pred_offsets, "pred_offsets");
    IndexArray p_s = int_array_like(pred_starts, "pred_starts"), p_e = int_array_like(pred_ends, "pred_ends");
    const bool need_labels = opt.scheme != AlignScheme::Jaccard;
    if (need_labels && (gold_labels.is_none() || pred_labels.is_none()))
        throw py::value_error("scheme '" + scheme + "' needs gold_labels and pred_labels (integer label ids)");
    IndexArray g_l, p_l;
    if (!gold_labels.is_none()) g_l = int_array_like(gold_labels, "gold_labels");
    if (!pred_labels.is_none()) p_l = int_array_like(pred_labels, "pred_labels");
    validate_side("gold", g_off, g_s, g_e, gold_labels.is_none() ? nullptr : &g_l);
    validate_side("pred", p_off, p_s, p_e, pred_labels.is_none() ? nullptr : &p_l);
    if (g_off.shape(0) != p_off.shape(0))
        throw py::value_error("gold_offsets and pred_offsets describe different numbers of records (" +
                              std::to_string(g_off.shape(0) - 1) + " vs " + std::to_string(p_off.shape(0) - 1) + ")");
    const std::size_t n_records = static_cast<std::size_t>(g_off.shape(0) - 1);

    BatchAlignment out;
    {
        py::gil_scoped_release release;
        out = align_batch(n_records, g_off.data(), g_s.data(), g_e.data(), need_labels ? g_l.data() : nullptr,
                          p_off.data(), p_s.data(), p_e.data(), need_labels ? p_l.data() : nullptr, opt, n_threads);
    }
    return py::make_tuple(to_numpy(std::move(out.pair_offsets)), to_numpy(std::move(out.gold_index)),
                          to_numpy(std::move(out.pred_index)), to_numpy(std::move(out.jaccard)),
                          to_numpy(std::move(out.used_dp)).attr("astype")("bool"));
}

}  // namespace

void register_alignment(py::module_& m) {
    m.def("align_spans_batch", &align_spans_batch, py::arg("gold_offsets"), py::arg("gold_starts"),
          py::arg("gold_ends"), py::arg("pred_offsets"), py::arg("pred_starts"), py::arg("pred_ends"),
          py::kw_only(), py::arg("gold_labels") = py::none(), py::arg("pred_labels") = py::none(),
          py::arg("scheme") = py::str("jaccard"), py::arg("method") = py::str("auto"),
          py::arg("min_jaccard") = py::float_(0.0), py::arg("min_overlap_percent") = py::float_(1.0),
          py::arg("n_threads") = py::int_(0),
          R"doc(Align gold and predicted character spans of many records (one-to-one, maximum weight).

Records are in CSR layout: record r owns gold spans gold_offsets[r]:gold_offsets[r+1] (starts,
ends exclusive). scheme 'jaccard' maximises the sum of character Jaccard (DMBertA); 'strict',
'exact', 'partial', 'type' maximise correct pairs, then matched pairs, then Jaccard, with
nervaluate's overlap rule (overlap >= min_overlap_percent of the gold span). method 'auto' uses
the DJA dynamic programme when both sides are sorted and non-overlapping, the Hungarian
assignment otherwise. The GIL is released while aligning.

Work per record is bounded (see docs/hardening.md): a record whose alignment would exceed the
limits of core/align_spans.hpp raises ValueError naming the record instead of allocating without
bound. The index arrays are copied before the GIL is released.

Returns (pair_offsets, gold_index, pred_index, jaccard, used_dp): matched pairs per record with
within-record indices, sorted by gold index, and whether the DP was used for each record.)doc");
}

}  // namespace rapidscore::bindings
