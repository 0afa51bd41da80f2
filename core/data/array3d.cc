#include "core/data/array3d.h"

#include "core/base/parallel_for.h"

namespace tomo::core {

void Array3D::Fill(float value) { ParallelFill(values_.data(), size(), value); }

Array3D Array3D::Clone() const {
  Array3D copy;
  copy.dims_ = dims_;
  copy.values_.resize(values_.size());
  ParallelCopy(values_.data(), size(), copy.values_.data());
  return copy;
}

}  // namespace tomo::core
