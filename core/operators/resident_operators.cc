#include "core/operators/resident_operators.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core {

absl::Status ResidentOperators::CopyFromPeer(ResidentOperators& source_ops,
                                             const ResidentArray& source,
                                             ResidentArray& target) {
  TOMO_RETURN_IF_ERROR(CheckResidentOperands("CopyFromPeer", &source_ops, source, source));
  TOMO_RETURN_IF_ERROR(CheckResidentOperands("CopyFromPeer", this, target, target));
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("CopyFromPeer: target", target.dims(), source.dims(),
                                      "(the source's)"));
  // Through host memory: correct between any two implementations.
  Array3D staging = Array3D::Uninitialized(source.dims());
  TOMO_RETURN_IF_ERROR(source_ops.Download(source, staging));
  return Upload(staging, target);
}

}  // namespace tomo::core
