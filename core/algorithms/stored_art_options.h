// The options of the "art" registry entry (stored_matrix_art.h): ART on a stored system
// matrix, and the matrix format to store it in. A plain struct, so that reconstruction.h's
// AlgorithmOptions can hold it without the algorithm.
#pragma once

#include "core/system_matrix/art_options.h"
#include "core/system_matrix/matrix_memory.h"

namespace tomo::core {

// The symmetric format's products on a CUDA device (system_matrix/cuda/
// device_stored_matrix.h): kOrbit its default kernels, kTiled the tiled ones with
// fixed-point accumulation, a sweep in one launch (faster sweeps; the tiled layout built at
// the matrix's first use and kept with it). The CPU and CSR run their own products whatever
// this says.
enum class StoredArtKernels { kOrbit, kTiled };

struct StoredArtOptions {
  system_matrix::ArtOptions art;
  // kAutomatic: the symmetric format when the scan has the eight-fold symmetry, else CSR.
  system_matrix::MatrixFormat format = system_matrix::MatrixFormat::kAutomatic;
  StoredArtKernels kernels = StoredArtKernels::kOrbit;
};

}  // namespace tomo::core
