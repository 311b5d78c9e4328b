// numpy argument checks shared by the register_*.cpp binding files.
// Each check raises TypeError / ValueError / IndexError naming the argument, with the GIL held,
// so the kernels (which trust their inputs) never see a malformed array.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/finite.hpp"

namespace rapidscore::bindings {

namespace py = pybind11;

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using IndexArray = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

inline std::string dtype_name(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// The object itself must already be a numpy array: lists are converted by the Python wrappers,
// so a list reaching the kernel means a caller bypassed them.
inline py::array as_array(const py::handle& obj, const char* name) {
    if (!py::isinstance<py::array>(obj))
        throw py::type_error(std::string(name) + " must be a numpy array, got " +
                             py::str(py::type::of(obj)).cast<std::string>());
    return py::reinterpret_borrow<py::array>(obj);
}

// Floating arrays: float16/32/64 accepted (converted to contiguous float32), NaN/inf refused.
// max_abs (optional): receives the largest magnitude, found by the same pass.
inline FloatArray float_array(const py::handle& obj, const char* name, py::ssize_t ndim, float* max_abs = nullptr) {
    py::array a = as_array(obj, name);
    if (a.dtype().kind() != 'f')
        throw py::type_error(std::string(name) + " must be a floating-point array, got dtype " +
                             dtype_name(a));
    if (a.ndim() != ndim)
        throw py::value_error(std::string(name) + " must have " + std::to_string(ndim) +
                              " dimension(s), got shape with " + std::to_string(a.ndim()));
    FloatArray out = FloatArray::ensure(a);
    if (!out) throw py::error_already_set();
    const std::size_t n = static_cast<std::size_t>(out.size());
    const rapidscore::FloatScan scan = rapidscore::scan_floats(out.data(), n);
    if (scan.first_non_finite != n)
        throw py::value_error(std::string(name) + " contains a non-finite value (NaN or inf) at flat index " +
                              std::to_string(scan.first_non_finite));
    if (max_abs != nullptr) *max_abs = scan.max_abs;
    return out;
}

// A private copy of an index array. Index arrays are validated and then read with the GIL
// released; reading the caller's buffer would let another Python thread change a validated
// offset or index in between (out-of-bounds reads). The copy is referenced by nobody else, so
// what was validated is what the kernel reads. Index arrays are small next to the embeddings.
inline IndexArray owned_copy(const IndexArray& a) {
    std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
    IndexArray out(shape);
    if (a.size() > 0) std::memcpy(out.mutable_data(), a.data(), static_cast<std::size_t>(a.size()) * sizeof(std::int64_t));
    return out;
}

// Integer arrays (any signed/unsigned integer dtype; floats are refused rather than truncated),
// returned as a private int64 copy (see owned_copy): validate the result, not the argument.
inline IndexArray index_array(const py::handle& obj, const char* name, py::ssize_t ndim) {
    py::array a = as_array(obj, name);
    const char kind = a.dtype().kind();
    if (kind != 'i' && kind != 'u')
        throw py::type_error(std::string(name) + " must be an integer array, got dtype " + dtype_name(a));
    if (a.ndim() != ndim)
        throw py::value_error(std::string(name) + " must have " + std::to_string(ndim) +
                              " dimension(s), got shape with " + std::to_string(a.ndim()));
    if (kind == 'u' && a.itemsize() == 8) {
        // uint64 values above INT64_MAX would wrap when cast; compare before converting.
        auto u = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
        for (py::ssize_t i = 0; i < u.size(); ++i)
            if (u.data()[i] > static_cast<std::uint64_t>(INT64_MAX))
                throw py::index_error(std::string(name) + " value " + std::to_string(u.data()[i]) +
                                      " is out of range");
    }
    IndexArray out = IndexArray::ensure(a);
    if (!out) throw py::error_already_set();
    return owned_copy(out);
}

// Integer array-likes (lists included) converted to a private one-dimensional int64 copy, for
// the span alignment whose callers pass Python lists directly. Floating values are refused
// (0.5 would silently become 0).
inline IndexArray int_array_like(const py::handle& obj, const char* name) {
    py::array raw = py::array::ensure(obj);  // lists as numpy would see them, without a dtype cast
    if (!raw) {
        PyErr_Clear();
        throw py::type_error(std::string(name) + " must be convertible to an int64 array");
    }
    const char kind = raw.dtype().kind();
    if (kind != 'i' && kind != 'u' && raw.size() > 0)  // an empty list is float64 to numpy: fine
        throw py::type_error(std::string(name) + " must hold integers, got dtype " + dtype_name(raw));
    IndexArray arr = IndexArray::ensure(raw);
    if (!arr) {
        PyErr_Clear();
        throw py::type_error(std::string(name) + " must be convertible to an int64 array");
    }
    if (arr.ndim() != 1) throw py::value_error(std::string(name) + " must be one-dimensional");
    return owned_copy(arr);
}

// A thread-count argument: a Python int (not bool) <= kMaxThreads. allow_negative: values <= 0
// mean "all hardware threads" (the alignment's convention); otherwise 0 does and < 0 is refused.
// Taking a py::object rather than an int keeps an oversized value from ending in pybind11's
// "incompatible function arguments" signature dump.
inline int thread_count(const py::handle& obj, const char* name, bool allow_negative) {
    if (!PyLong_Check(obj.ptr()) || PyBool_Check(obj.ptr()))
        throw py::type_error(std::string(name) + " must be an int, got " +
                             py::str(py::type::of(obj)).cast<std::string>());
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
    if (value == -1 && PyErr_Occurred()) throw py::error_already_set();
    const std::string range = allow_negative ? "<= 1024 (<= 0: all hardware threads)"
                                             : "in [0, 1024] (0: all hardware threads)";
    if (overflow != 0 || value > 1024 || (!allow_negative && value < 0))
        throw py::value_error(std::string(name) + " must be " + range + ", got " +
                              py::str(obj).cast<std::string>());
    return value < 0 ? 0 : static_cast<int>(value);
}

inline std::string type_name(const py::handle& obj) { return py::type::of(obj).attr("__name__").cast<std::string>(); }

// Scalar and text arguments are taken as py::handle and converted here, so that a wrong type is
// a TypeError naming the argument rather than pybind11's "incompatible function arguments" dump.
inline std::string str_arg(const py::handle& obj, const std::string& name) {
    if (!py::isinstance<py::str>(obj))
        throw py::type_error(name + " must be a str, got " + type_name(obj) + ": " + py::repr(obj).cast<std::string>());
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
    if (utf8 == nullptr) {  // a lone surrogate
        PyErr_Clear();
        throw py::value_error(name + " is not valid Unicode text (it holds a lone surrogate)");
    }
    return std::string(utf8, static_cast<std::size_t>(size));
}

// A real number: a Python int or float, or a numpy scalar (not a bool, not a str).
inline double real_arg(const py::handle& obj, const std::string& name) {
    if (PyBool_Check(obj.ptr()) || !(PyFloat_Check(obj.ptr()) || PyLong_Check(obj.ptr()) ||
                                     py::isinstance(obj, py::module_::import("numbers").attr("Real"))))
        throw py::type_error(name + " must be a number, got " + type_name(obj) + ": " + py::repr(obj).cast<std::string>());
    const double value = PyFloat_AsDouble(obj.ptr());
    if (value == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    return value;
}

// A list of str (a tuple too), each item named by its index in errors.
inline std::vector<std::string> str_list_arg(const py::handle& obj, const std::string& name) {
    if (!py::isinstance<py::list>(obj) && !py::isinstance<py::tuple>(obj))
        throw py::type_error(name + " must be a list of str, got " + type_name(obj));
    std::vector<std::string> out;
    std::size_t i = 0;
    for (const py::handle item : obj) out.push_back(str_arg(item, name + "[" + std::to_string(i++) + "]"));
    return out;
}

// Hands a vector's buffer to numpy without a copy (the capsule frees it with the array).
template <typename T>
py::array_t<T> to_numpy(std::vector<T>&& values) {
    auto* holder = new std::vector<T>(std::move(values));
    py::capsule owner(holder, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>({static_cast<py::ssize_t>(holder->size())}, {static_cast<py::ssize_t>(sizeof(T))},
                          holder->data(), owner);
}

}  // namespace rapidscore::bindings
