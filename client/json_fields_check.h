// Checks a parsed JSON document against a protobuf message type before protobuf's own JSON
// parser reads it, so that the two mistakes a hand-written file makes most get a message
// that says what to write instead:
//   - an unknown field: its path, the message type, and the nearest field name
//       "algorithm.sirt.iteratons: no field \"iteratons\" in tomoserve.v1.IterativeOptions;
//        did you mean \"iterations\"?"
//   - an unknown enum name: its path, the enum type and every allowed name
//       "geometry.cone.detector.shape: \"FLAT\" is not a tomoserve.v1.DetectorShape; allowed:
//        DETECTOR_SHAPE_UNSPECIFIED, DETECTOR_SHAPE_FLAT, DETECTOR_SHAPE_CYLINDRICAL (did you
//        mean DETECTOR_SHAPE_FLAT?)"
// Paths use the proto's field names (as tomod's validation does); keys may be the proto names
// or their lowerCamelCase JSON names. What the check does not look at (value types, numbers'
// ranges) is left to protobuf's parser and to the spec's validation. Well-known types
// (google.protobuf.*) are not descended into.
//
// Errors: INVALID_ARGUMENT with the message above; OK otherwise.
//
//   TOMO_RETURN_IF_ERROR(CheckJsonFields(document, tomoserve::v1::JobSpec::descriptor()));
#pragma once

#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"
#include "nlohmann/json.hpp"

namespace tomo::client {

absl::Status CheckJsonFields(const nlohmann::ordered_json& document,
                             const google::protobuf::Descriptor* type);

}  // namespace tomo::client
