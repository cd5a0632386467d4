// What the bindings share: absl::Status as Python exceptions, waiting on
// futures without holding the GIL, and host values between numpy and
// hlo::Literal.
//
// Every function here is called with the GIL held.
#ifndef CAUSEWAY_PYTHON_CONVERT_H_
#define CAUSEWAY_PYTHON_CONVERT_H_

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/future.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"

namespace causeway::python {

namespace nb = nanobind;

// A non-OK status on its way to Python. The translator registered by
// RegisterStatusErrors turns it into an instance of the causeway.Error
// subclass for its code.
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status) : status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return "causeway status"; }

 private:
  absl::Status status_;
};

// Installs the translator. `factory(code: int, message: str)` returns the
// exception to raise (causeway/errors.py provides it).
void RegisterStatusErrors(nb::module_& m);

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}
template <typename T>
T Unwrap(absl::StatusOr<T> result) {
  if (!result.ok()) throw StatusError(std::move(result).status());
  return *std::move(result);
}

// Waits for `future` with the GIL released, in short slices between which
// it checks for signals (Ctrl-C raises KeyboardInterrupt) and the deadline
// (`timeout_s`; none: no deadline). DeadlineExceeded when the deadline
// passes first. Returns the future's result (not yet checked for errors).
template <typename T>
const internal::FutureResult<T>& Wait(const Future<T>& future,
                                      std::optional<double> timeout_s,
                                      const char* what) {
  if (!future.IsReady()) {
    const absl::Time deadline =
        timeout_s.has_value() ? absl::Now() + absl::Seconds(*timeout_s)
                              : absl::InfiniteFuture();
    while (!future.IsReady()) {
      {
        nb::gil_scoped_release release;
        // The result (a copy) is read below, once ready.
        (void)future.AwaitUntil(
            std::min(deadline, absl::Now() + absl::Milliseconds(50)));
      }
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
      if (!future.IsReady() && absl::Now() >= deadline) {
        throw StatusError(absl::DeadlineExceededError(
            std::string(what) + " not ready within " +
            std::to_string(*timeout_s) + " s"));
      }
    }
  }
  return future.Await();
}

// "f32", "bf16", ... for array types; InvalidArgument otherwise.
hlo::PrimitiveType ParseDtype(const std::string& name);

hlo::Shape MakeShape(const std::string& dtype,
                     const std::vector<int64_t>& dims);
nb::tuple DimsTuple(const hlo::Shape& shape);

// The bytes of a C-contiguous host array, as numpy views them as uint8.
using HostBytes =
    nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A literal of `shape` holding `bytes` (which must be exactly its size).
hlo::Literal LiteralFromBytes(const hlo::Shape& shape, const HostBytes& bytes);

// A read-only uint8 numpy array over the literal's bytes, which it keeps
// alive (no copy). Python views it with the literal's dtype and shape.
nb::object LiteralBytes(hlo::Literal literal);

}  // namespace causeway::python

#endif  // CAUSEWAY_PYTHON_CONVERT_H_
