// Status propagation helpers for absl::Status / absl::StatusOr, which Abseil 20220623
// does not export publicly.
//
//   TOMO_RETURN_IF_ERROR(WriteRaw(path, data));
//   TOMO_ASSIGN_OR_RETURN(auto geometry, ParallelGeometry2D::Create(...));
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TOMO_STATUS_CONCAT_INNER_(a, b) a##b
#define TOMO_STATUS_CONCAT_(a, b) TOMO_STATUS_CONCAT_INNER_(a, b)

#define TOMO_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::absl::Status tomo_status_ = (expr);          \
    if (!tomo_status_.ok()) return tomo_status_;   \
  } while (false)

#define TOMO_ASSIGN_OR_RETURN(lhs, rexpr) \
  TOMO_ASSIGN_OR_RETURN_IMPL_(TOMO_STATUS_CONCAT_(tomo_statusor_, __LINE__), lhs, rexpr)

#define TOMO_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                \
  if (!statusor.ok()) return statusor.status();           \
  lhs = std::move(statusor).value()
