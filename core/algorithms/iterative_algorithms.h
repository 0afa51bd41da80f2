// The iterative methods as registry entries (reconstruction.h): "sirt", "sart", "os_sart"
// and "cgls", each taking its options from ReconstructionRequest::algorithm and a geometry
// of either kind: a VectorGeometry with a vector projector model, a RadonGeometry with
// kRadonPlaneIntegral (IterativeOptions::projector; another model is INVALID_ARGUMENT naming
// the model and the kind). The FBP start of a RadonGeometry is RadonFbp.
// AlgorithmRegistry::WithBuiltins registers them.
//
// On several backends (Algorithm::RunOnBackends, one job on all of a host's GPUs) a
// VectorGeometry run shares the work: the method runs once on a
// SeveralDevicesResidentOperators over the backends' ResidentOperators (views split among
// the devices, the volume replicated, one volume reduced and broadcast per back projection;
// several_devices_resident_operators.h, docs/iterative.md), its result equal to one
// device's up to float rounding; the FBP start then uses Fdk's several-backends form. A
// RadonGeometry runs on the first backend (its CUDA projector goes through host memory on
// every call: a second device would add copies, not speed). One backend: Run, unchanged.
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
