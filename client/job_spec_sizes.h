// The sizes a JobSpec implies, so that a hand-written spec need not compute them: the
// projections' shape from the geometry, and the raw input's bytes from that and the
// encoding. tomod still checks every size (input.size_bytes must match); this only fills in.
//
//   ProjectionShape  views x rows x columns of the geometry (radon_3d: directions x 1 x
//                    samples); nullopt for from_input_files (the files say) or no geometry.
//   FillImpliedInputSize  sets input.size_bytes when it is 0: to the sum of the listed
//                    input.files' sizes, else, for a raw encoding (float32: 4 bytes a
//                    value, uint16: 2), to what the geometry implies; returns whether it did.
//
//   if (FillImpliedInputSize(&spec)) std::cout << spec.input().size_bytes();
#pragma once

#include <cstdint>
#include <optional>

#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::client {

struct ProjectionDims {
  uint64_t views = 0, rows = 0, columns = 0;
};

std::optional<ProjectionDims> ProjectionShape(const tomoserve::v1::Geometry& geometry);

// Bytes of one raw value of the encoding (4 for float32, 2 for uint16), 0 for the others.
uint64_t RawValueBytes(tomoserve::v1::DataEncoding encoding);

bool FillImpliedInputSize(tomoserve::v1::JobSpec* spec);

}  // namespace tomo::client
