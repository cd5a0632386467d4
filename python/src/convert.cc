#include "convert.h"

#include <cstring>
#include <exception>

#include "absl/strings/str_cat.h"

namespace causeway::python {
namespace {

// causeway.errors._from_status, set once at import and never released: the
// translator may run until the interpreter ends.
PyObject* g_error_factory = nullptr;

void TranslateStatusError(const std::exception_ptr& exception, void*) {
  try {
    std::rethrow_exception(exception);
  } catch (const StatusError& e) {
    if (g_error_factory == nullptr) {
      PyErr_SetString(PyExc_RuntimeError, e.status().ToString().c_str());
      return;
    }
    const absl::string_view message = e.status().message();
    PyObject* text = PyUnicode_DecodeUTF8(
        message.data(), static_cast<Py_ssize_t>(message.size()), "replace");
    if (text == nullptr) return;
    PyObject* error = PyObject_CallFunction(
        g_error_factory, "iN", static_cast<int>(e.status().code()), text);
    if (error == nullptr) return;  // The factory raised: that propagates.
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error)), error);
    Py_DECREF(error);
  }
}

}  // namespace

void RegisterStatusErrors(nb::module_& m) {
  nb::register_exception_translator(TranslateStatusError);
  m.def(
      "_set_error_factory",
      [](nb::callable factory) {
        Py_XDECREF(g_error_factory);
        g_error_factory = factory.release().ptr();
      },
      "Sets the callable(code, message) that makes the exception raised for "
      "a runtime error.");
}

hlo::PrimitiveType ParseDtype(const std::string& name) {
  std::optional<hlo::PrimitiveType> type = hlo::PrimitiveTypeFromName(name);
  if (!type.has_value() || !hlo::IsArrayType(*type)) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("unsupported dtype '", name, "'")));
  }
  return *type;
}

hlo::Shape MakeShape(const std::string& dtype,
                     const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    if (d < 0) {
      throw StatusError(absl::InvalidArgumentError(
          absl::StrCat("negative dimension ", d, " in a shape")));
    }
  }
  return hlo::Shape(ParseDtype(dtype), dims);
}

nb::tuple DimsTuple(const hlo::Shape& shape) {
  nb::list dims;
  for (int64_t d : shape.dims()) dims.append(d);
  return nb::tuple(dims);
}

hlo::Literal LiteralFromBytes(const hlo::Shape& shape, const HostBytes& bytes) {
  const int64_t size = shape.ByteSize();
  if (static_cast<int64_t>(bytes.size()) != size) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("host array has ", bytes.size(), " bytes, ",
                     shape.ToString(), " needs ", size)));
  }
  hlo::Literal literal = hlo::Literal::Uninitialized(shape);
  if (size > 0) {
    std::memcpy(literal.mutable_untyped_data(), bytes.data(), size);
  }
  return literal;
}

nb::object LiteralBytes(hlo::Literal literal) {
  if (!hlo::IsArrayType(literal.shape().type())) {
    throw StatusError(absl::InternalError(
        absl::StrCat("fetched a non-array value ", literal.shape().ToString())));
  }
  auto* owned = new hlo::Literal(std::move(literal));
  nb::capsule owner(owned, [](void* p) noexcept {
    delete static_cast<hlo::Literal*>(p);
  });
  const size_t size = static_cast<size_t>(owned->size_bytes());
  nb::ndarray<nb::numpy, const uint8_t, nb::ndim<1>> array(
      owned->untyped_data(), {size}, owner);
  return array.cast();
}

}  // namespace causeway::python
