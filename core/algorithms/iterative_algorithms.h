// The iterative methods as registry entries (reconstruction.h): "sirt", "sart", "os_sart"
// and "cgls", each taking its options from ReconstructionRequest::algorithm and a geometry
// of either kind: a VectorGeometry with a vector projector model, a RadonGeometry with
// kRadonPlaneIntegral (IterativeOptions::projector; another model is INVALID_ARGUMENT naming
// the model and the kind). The FBP start of a RadonGeometry is RadonFbp.
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
