// Bindings for the paired resampling kernels of rapidscore.compare (csrc/core/resample.hpp).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "bindings/arrays.hpp"
#include "bindings/registry.hpp"
#include "core/resample.hpp"

namespace py = pybind11;

namespace rapidscore::bindings {

namespace {

using Rows = py::array_t<double, py::array::c_style>;

// A Python int in [0, 2^64) (not a bool), named in the error.
std::uint64_t uint64_arg(const py::handle& obj, const char* name) {
    if (!PyLong_Check(obj.ptr()) || PyBool_Check(obj.ptr()))
        throw py::type_error(std::string(name) + " must be an int, got " + type_name(obj));
    const unsigned long long value = PyLong_AsUnsignedLongLong(obj.ptr());
    if (value == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        PyErr_Clear();
        throw py::value_error(std::string(name) + " must be an int in [0, 2**64), got " + py::repr(obj).cast<std::string>());
    }
    return value;
}

// rows: a C-contiguous float64 (n, stride) array with 1 <= n < 2^32 and stride 1, 2, 4 or a
// multiple of 8 (the caller pads); first + count resamples of n draws must fit the 64-bit counter.
Rows rows_arg(const py::handle& obj, const char* name, std::uint64_t first, std::uint64_t count,
              std::uint64_t draws_per_step) {
    py::array a = as_array(obj, name);
    if (a.dtype().kind() != 'f' || a.itemsize() != 8)
        throw py::type_error(std::string(name) + " must be a float64 array, got dtype " + dtype_name(a));
    if (a.ndim() != 2)
        throw py::value_error(std::string(name) + " must have 2 dimensions (items, columns), got " +
                              std::to_string(a.ndim()));
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(name) + " must be C-contiguous");
    const auto n = static_cast<std::uint64_t>(a.shape(0)), stride = static_cast<std::uint64_t>(a.shape(1));
    if (n == 0 || n >= (std::uint64_t{1} << 32))
        throw py::value_error(std::string(name) + " must have between 1 and 2**32 - 1 items, got " + std::to_string(n));
    if (!(stride == 1 || stride == 2 || stride == 4 || (stride > 0 && stride % 8 == 0)))
        throw py::value_error(std::string(name) + " must have 1, 2, 4 or a multiple of 8 columns, got " +
                              std::to_string(stride));
    const std::uint64_t limit = ~std::uint64_t{0} / draws_per_step;
    if (first > limit || count > limit - first)
        throw py::value_error("first + count (" + std::to_string(first) + " + " + std::to_string(count) +
                              ") runs past the 64-bit draw counter");
    return py::reinterpret_borrow<Rows>(a);
}

template <typename Kernel>
py::array_t<double> run(const Rows& rows, std::uint64_t count, Kernel&& kernel) {
    const auto n = static_cast<std::size_t>(rows.shape(0)), stride = static_cast<std::size_t>(rows.shape(1));
    py::array_t<double> out({static_cast<py::ssize_t>(count), static_cast<py::ssize_t>(stride)});
    const double* data = rows.data();
    double* sums = out.mutable_data();
    py::gil_scoped_release release;
    kernel(data, n, stride, static_cast<std::size_t>(count), sums);
    return out;
}

}  // namespace

void register_resampling(py::module_& m) {
    m.def(
        "bootstrap_sums",
        [](const py::handle& rows_obj, const py::handle& key_obj, const py::handle& first_obj,
           const py::handle& count_obj) {
            const std::uint64_t key = uint64_arg(key_obj, "key"), first = uint64_arg(first_obj, "first"),
                                count = uint64_arg(count_obj, "count");
            const py::array a = as_array(rows_obj, "rows");
            const auto n = a.ndim() >= 1 ? static_cast<std::uint64_t>(a.shape(0)) : 0;
            const Rows rows = rows_arg(rows_obj, "rows", first, count, n == 0 ? 1 : n);
            return run(rows, count, [&](const double* data, std::size_t items, std::size_t stride,
                                                   std::size_t total, double* out) {
                rapidscore::resample::bootstrap_sums(data, items, stride, key, first, total, out);
            });
        },
        py::arg("rows"), py::arg("key"), py::arg("first"), py::arg("count"),
        "(count, columns) float64: the column sums of rows (n, columns) over bootstrap resamples first .. "
        "first + count - 1 of the SplitMix64 stream keyed key (see rapidscore.kernels.resampling).");
    m.def(
        "randomization_sums",
        [](const py::handle& gaps_obj, const py::handle& key_obj, const py::handle& first_obj,
           const py::handle& count_obj) {
            const std::uint64_t key = uint64_arg(key_obj, "key"), first = uint64_arg(first_obj, "first"),
                                count = uint64_arg(count_obj, "count");
            const py::array a = as_array(gaps_obj, "gaps");
            const auto n = a.ndim() >= 1 ? static_cast<std::uint64_t>(a.shape(0)) : 0;
            const Rows gaps = rows_arg(gaps_obj, "gaps", first, count, n == 0 ? 1 : (n + 63) / 64);
            return run(gaps, count, [&](const double* data, std::size_t items, std::size_t stride,
                                                   std::size_t total, double* out) {
                rapidscore::resample::randomization_sums(data, items, stride, key, first, total, out);
            });
        },
        py::arg("gaps"), py::arg("key"), py::arg("first"), py::arg("count"),
        "(count, columns) float64: the column sums of gaps (n, columns) over the items that randomization "
        "trials first .. first + count - 1 swap (SplitMix64 stream keyed key; see rapidscore.kernels.resampling).");
    m.def("isa", []() { return std::string(rapidscore::resample::resample_isa_name()); },
          "The copy the resampling kernels run on this CPU (chosen at run time by CPUID): \"x86-64-v4\" (AVX-512: "
          "the draws vectorised) or \"baseline\"; every copy gives the same sums.");
}

}  // namespace rapidscore::bindings
