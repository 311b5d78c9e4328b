// Bindings for the refusal keyword matcher (csrc/core/phrase_match.hpp).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings/arrays.hpp"
#include "bindings/registry.hpp"
#include "core/parallel.hpp"
#include "core/phrase_match.hpp"

namespace py = pybind11;

namespace rapidscore::bindings {

void register_phrases(py::module_& m) {
    using rapidscore::phrases::FuzzyPhraseMatcher;
    py::class_<FuzzyPhraseMatcher>(m, "FuzzyPhraseMatcher",
                                   "Exact fast decision of max_k partial_ratio(response, phrase_k) / 100 > threshold "
                                   "(SELECT keyword detector) for ASCII responses.")
        .def(py::init([](const py::handle& phrases_obj, const py::handle& lengths_obj, const py::handle& threshold) {
                 std::vector<std::string> phrases = str_list_arg(phrases_obj, "processed_phrases");
                 if (!py::isinstance<py::list>(lengths_obj) && !py::isinstance<py::tuple>(lengths_obj))
                     throw py::type_error("raw_lengths must be a list of int, got " + type_name(lengths_obj));
                 std::vector<std::size_t> raw_lengths;
                 for (const py::handle item : lengths_obj) {
                     const std::string where = "raw_lengths[" + std::to_string(raw_lengths.size()) + "]";
                     if (!PyLong_Check(item.ptr()) || PyBool_Check(item.ptr()))
                         throw py::type_error(where + " must be an int, got " + type_name(item));
                     int overflow = 0;
                     const long long length = PyLong_AsLongLongAndOverflow(item.ptr(), &overflow);
                     if (overflow != 0 || length < 0)
                         throw py::value_error(where + " must be an int >= 0, got " + py::repr(item).cast<std::string>());
                     raw_lengths.push_back(static_cast<std::size_t>(length));
                 }
                 return FuzzyPhraseMatcher(std::move(phrases), std::move(raw_lengths),
                                           real_arg(threshold, "threshold"));
             }),
             py::arg("processed_phrases"), py::arg("raw_lengths"), py::arg("threshold"))
        .def_property_readonly("threshold", &FuzzyPhraseMatcher::threshold)
        .def("__len__", &FuzzyPhraseMatcher::size)
        .def(
            "match",
            [](const FuzzyPhraseMatcher& self, const py::handle& texts_obj, const py::handle& threads_obj) {
                const int n_threads = bindings::thread_count(threads_obj, "n_threads", true);
                if (!py::isinstance<py::list>(texts_obj))
                    throw py::type_error("texts must be a list of str, got " + type_name(texts_obj));
                const auto texts = py::reinterpret_borrow<py::list>(texts_obj);
                // A str that cannot be encoded as UTF-8 (a lone surrogate, e.g. from a JSON
                // "\ud800" escape) is not an error: it is left to the reference path (status 2),
                // which works on Python strings.
                std::vector<std::string> items;
                std::vector<char> not_utf8(texts.size(), 0);
                items.reserve(texts.size());
                for (std::size_t i = 0; i < texts.size(); ++i) {
                    py::handle item = texts[i];
                    if (!py::isinstance<py::str>(item))
                        throw py::type_error("texts[" + std::to_string(i) + "] must be a str, got " +
                                             py::str(py::type::of(item)).cast<std::string>());
                    Py_ssize_t size = 0;
                    const char* utf8 = PyUnicode_AsUTF8AndSize(item.ptr(), &size);
                    if (utf8 == nullptr) {
                        PyErr_Clear();
                        not_utf8[i] = 1;
                        items.emplace_back();
                    } else {
                        items.emplace_back(utf8, static_cast<std::size_t>(size));
                    }
                }
                const std::size_t n = items.size();
                py::array_t<int8_t> status(static_cast<py::ssize_t>(n));
                py::array_t<int32_t> best_index(static_cast<py::ssize_t>(n));
                py::array_t<double> best_score(static_cast<py::ssize_t>(n));
                int8_t* st = status.mutable_data();
                int32_t* bi = best_index.mutable_data();
                double* bs = best_score.mutable_data();
                {
                    py::gil_scoped_release release;
                    rapidscore::parallel_for(
                        n, n_threads,
                        [&](std::size_t i) {
                            if (not_utf8[i]) {
                                st[i] = rapidscore::phrases::kFallback;
                                bi[i] = -1;
                                bs[i] = 0.0;
                                return;
                            }
                            auto r = self.match(items[i]);
                            st[i] = r.status;
                            bi[i] = r.best_index;
                            bs[i] = r.best_score;
                        },
                        256);
                }
                return py::make_tuple(status, best_index, best_score);
            },
            py::arg("texts"), py::arg("n_threads") = py::int_(0),
            "Returns (status int8: 0 below threshold, 1 above, 2 needs the reference path; "
            "best phrase index int32; best partial_ratio float64) per text.");
    m.def("expand_contractions_ascii",
          [](const py::handle& text) { return rapidscore::phrases::expand_contractions_ascii(str_arg(text, "text")); },
          py::arg("text"),
          "SELECT's contraction rules for ASCII text (exposed for tests).");
    m.def("default_process_ascii",
          [](const py::handle& text) { return rapidscore::phrases::default_process_ascii(str_arg(text, "text")); },
          py::arg("text"),
          "rapidfuzz.utils.default_process for ASCII text (exposed for tests).");
}

}  // namespace rapidscore::bindings
