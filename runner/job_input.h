// From a job's uploaded bytes to what the algorithm needs: the projections as line integrals
// (views, rows, columns), the geometry when the files carry it (DICOM-CT-PD), per-view
// photon statistics for statistical methods, and the AcquisitionMetadata the outputs copy
// (patient/study attributes, water attenuation). tomod's workers and `tomo local` call it
// where they used to read one raw float32 file; tomod's Submit calls CheckJobInputHeaders
// before it commits the job.
//
// The spooled input is one file holding the uploaded files back to back, in the order and
// sizes of JobSpec.input.files (or one raw projections file when the list is empty). By
// encoding:
//   FLOAT32_LE/BE, UINT16_LE/BE  raw values in input.order (core/io/raw_stream.h); dark and
//                                flat files hold whole frames, averaged per pixel
//   TIFF                          one view per page, files in order (tiff_stack_reader.h)
//   DICOM_CT_PD                   one view per file (dicom_ct_pd_reader.h); geometry and
//                                values from the files
//   HDF5                          one scan file first (hdf5_scan_reader.h): projections,
//                                flats, darks and optionally the angles
// then, for raw and TIFF, input.preprocessing: bad pixels (from the fields and a mask file),
// dark/flat correction when a flat field is uploaded, unusable readings replaced, -log with
// its floor when negative_log (core/preprocessing/detector_correction.h).
//
// Errors: INVALID_ARGUMENT naming the file and the tag or page (from the readers), or the
// mismatch with the geometry ("input: 3 TIFF pages of 64 x 128 (views, rows, columns) do
// not match the geometry's (720, 64, 128)"), or for DICOM-CT-PD a geometry that does not
// fit the volume; DATA_LOSS when the spooled file is not the size the spec says; NOT_FOUND
// when it cannot be opened.
//
//   TOMO_ASSIGN_OR_RETURN(JobInput input, ResolveJobInput(job, spool_input_path));
//   TOMO_ASSIGN_OR_RETURN(core::ReconstructionRequest request, RequestForInput(job, input));
//   registry.RunOnBackends(request, input.projections, backends, context);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/algorithms/reconstruction.h"
#include "core/data/array3d.h"
#include "core/devices/host_pinning.h"
#include "core/geometry/vector_geometry.h"
#include "core/io/acquisition_metadata.h"
#include "runner/job_spec.h"

namespace tomo::server {

struct JobInput {
  core::Array3D projections;                     // (views, rows, columns) line integrals
  std::optional<core::VectorGeometry> geometry;  // from the files (DICOM-CT-PD) only
  core::Array3D photon_statistics;  // (views, 1, n) from DICOM-CT-PD; empty otherwise
  core::AcquisitionMetadata metadata;
  int64_t clamped_transmissions = 0;  // values the -log guard raised to min_transmission
  // What the detector corrections found and chose, one line each (for the job's notes,
  // events and log; core/preprocessing/detector_correction.h); empty when none ran.
  std::vector<std::string> notes;
  // The views' angles from an HDF5 file (input.hdf5.angles_from_file); RequestForInput
  // rebuilds the geometry with them. Empty otherwise.
  std::vector<double> angles_deg;
  // Keeps `projections` page-locked (InputPrefetcher pins an input it reads ahead for CUDA
  // workers: their copies then go straight from it); null or !pinned(): plain memory.
  // Declared after projections, so destroyed (unregistered) before they are freed; reset it
  // before assigning over projections or over a whole JobInput holding one (JobInput's
  // move assignment frees the old projections before it reaches this field).
  std::unique_ptr<core::PinnedHostRegion> pinned_projections;
};

absl::StatusOr<JobInput> ResolveJobInput(const ValidatedJob& job, const std::string& input_path);

// Whether the spooled input is the projections exactly as the algorithm takes them: float32
// little endian (or unspecified), one file in view-row-column order, no preprocessing, the
// geometry in the spec (no centre of rotation to estimate). ResolveJobInput then only reads the file; tomod may read it while
// it is uploaded (upload_stream.h).
bool InputIsPlainProjections(const ValidatedJob& job);

// The job's request with the geometry the input resolved to (job.request when the spec
// gave the geometry). INVALID_ARGUMENT when a geometry from the files does not fit the
// volume (a source inside it) or is 2D while the volume has several slices.
absl::StatusOr<core::ReconstructionRequest> RequestForInput(const ValidatedJob& job,
                                                            const JobInput& input);

// The cheap Submit-time check: headers only (DICOM-CT-PD files parsed up to their pixel
// data, TIFF directories), no pixel decoded: every required tag, one detector across files,
// page sizes and counts against the geometry. OK at once for raw encodings (their sizes
// were checked with the spec).
absl::Status CheckJobInputHeaders(const ValidatedJob& job, const std::string& input_path);

}  // namespace tomo::server
