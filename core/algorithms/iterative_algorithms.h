// The iterative methods as registry entries (reconstruction.h): "sirt", "sart", "os_sart"
// and "cgls", each taking its options from ReconstructionRequest::algorithm and any
// geometry (a ParallelGeometry2D runs as its one-row VectorGeometry, iterative_common.h).
// AlgorithmRegistry::WithBuiltins registers them.
//
//   registry.Register("sirt", MakeSirtAlgorithm());
#pragma once

#include <memory>

#include "core/algorithms/reconstruction.h"

namespace tomo::core {

std::unique_ptr<Algorithm> MakeSirtAlgorithm();
std::unique_ptr<Algorithm> MakeSartAlgorithm();
std::unique_ptr<Algorithm> MakeOsSartAlgorithm();
std::unique_ptr<Algorithm> MakeCglsAlgorithm();

}  // namespace tomo::core
