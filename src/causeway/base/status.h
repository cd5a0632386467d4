// Status helpers shared by every component: early-return macros over
// absl::Status / absl::StatusOr.
#ifndef CAUSEWAY_BASE_STATUS_H_
#define CAUSEWAY_BASE_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CW_CONCAT_INNER_(a, b) a##b
#define CW_CONCAT_(a, b) CW_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` yields a non-OK status.
#define CW_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::absl::Status cw_status_ = (expr);           \
    if (!cw_status_.ok()) return cw_status_;      \
  } while (false)

// `CW_ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a StatusOr or returns its
// error.
#define CW_ASSIGN_OR_RETURN(lhs, expr) \
  CW_ASSIGN_OR_RETURN_IMPL_(CW_CONCAT_(cw_statusor_, __LINE__), lhs, expr)
#define CW_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#endif  // CAUSEWAY_BASE_STATUS_H_
