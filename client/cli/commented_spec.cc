#include "client/cli/commented_spec.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/job_spec_json.h"
#include "nlohmann/json.hpp"

namespace tomo::cli {
namespace {

namespace pb = ::google::protobuf;
using Json = nlohmann::ordered_json;

// What a field means, by its full name (message.field); enums get their allowed names
// without an entry here.
const std::map<std::string, std::string>& FieldNotes() {
  static const auto* notes = new std::map<std::string, std::string>{
      {"tomoserve.v1.JobSpec.name", "free text shown in listings"},
      {"tomoserve.v1.JobSpec.idempotency_key",
       "empty: tomo submit makes one; the same key returns the same job"},
      {"tomoserve.v1.JobSpec.priority", "[-100, 100]; higher runs first"},
      {"tomoserve.v1.JobSpec.memory_budget_bytes", "0: the device's free memory"},
      {"tomoserve.v1.ParallelBeam2D.num_detectors", "detector columns"},
      {"tomoserve.v1.ParallelBeam2D.detector_spacing_mm", "mm, > 0"},
      {"tomoserve.v1.ParallelBeam2D.detector_offset_mm", "mm, shift of the detector centre"},
      {"tomoserve.v1.FanBeam2D.num_detectors", "detector columns"},
      {"tomoserve.v1.FanBeam2D.detector_spacing_mm", "mm at the detector, > 0"},
      {"tomoserve.v1.FanBeam2D.detector_offset_mm", "mm, shift of the detector centre"},
      {"tomoserve.v1.FanBeam2D.source_origin_mm", "mm, source to rotation axis"},
      {"tomoserve.v1.FanBeam2D.origin_detector_mm", "mm, rotation axis to detector"},
      {"tomoserve.v1.Detector.rows", "detector rows (along z)"},
      {"tomoserve.v1.Detector.columns", "detector columns"},
      {"tomoserve.v1.Detector.row_spacing_mm", "mm, > 0"},
      {"tomoserve.v1.Detector.column_spacing_mm", "mm, > 0 (cylindrical: arc length)"},
      {"tomoserve.v1.Detector.offset_u_mm", "mm, detector centre shift along the columns"},
      {"tomoserve.v1.Detector.offset_v_mm", "mm, detector centre shift along z"},
      {"tomoserve.v1.ConeBeam.source_origin_mm", "mm, source to rotation axis"},
      {"tomoserve.v1.ConeBeam.origin_detector_mm", "mm, rotation axis to detector"},
      {"tomoserve.v1.HelicalConeBeam.pitch_mm_per_turn", "mm of table feed per 360 degrees"},
      {"tomoserve.v1.HelicalConeBeam.z_start_mm", "mm, source z at the first view"},
      {"tomoserve.v1.UniformAngles.count", "views"},
      {"tomoserve.v1.UniformAngles.start_deg", "degrees, first view"},
      {"tomoserve.v1.UniformAngles.span_deg",
       "degrees covered (views at start + k span / count)"},
      {"tomoserve.v1.ViewVectorList.rows", "detector rows"},
      {"tomoserve.v1.ViewVectorList.columns", "detector columns"},
      {"tomoserve.v1.Radon3D.num_samples", "plane integrals per direction, [2, 65536]"},
      {"tomoserve.v1.Radon3D.sample_spacing_mm", "mm between planes, > 0"},
      {"tomoserve.v1.RadonUniformSolidAngle.count", "directions"},
      {"tomoserve.v1.Volume.center_mm", "mm; (0, 0, 0) is the rotation axis"},
      {"tomoserve.v1.Volume.voxel_size_mm", "mm"},
      {"tomoserve.v1.Volume.size", "voxels; z 1 for 2D geometries"},
      {"tomoserve.v1.ProjectionInput.size_bytes",
       "bytes of the upload; follows from the geometry for raw data"},
      {"tomoserve.v1.ProjectionInput.files", "filled from --data for TIFF and DICOM-CT-PD"},
      {"tomoserve.v1.Preprocessing.negative_log",
       "true: the data are intensities, take -log (with dark/flat files when listed)"},
      {"tomoserve.v1.FbpOptions.cutoff", "fraction of Nyquist, (0, 1]; unset means 1"},
      {"tomoserve.v1.IterativeOptions.iterations", "[1, tomod's --max_iterations]"},
      {"tomoserve.v1.IterativeOptions.relaxation", "(0, 2); unset means 1"},
      {"tomoserve.v1.IterativeOptions.non_negative", "clamp x >= 0 after each update"},
      {"tomoserve.v1.IterativeOptions.stop_relative_residual",
       "[0, 1); stop once ||b - Ax|| / ||b|| is this small; 0: run every iteration"},
      {"tomoserve.v1.IterativeOptions.initial_volume_float32",
       "with INITIAL_VOLUME_GIVEN: base64 of the float32 z-y-x volume"},
      {"tomoserve.v1.OsSartOptions.blocks", "[1, views]: 1 is SIRT, views is SART"},
      {"tomoserve.v1.StoredMatrixArtOptions.iterations", "sweeps over all blocks"},
      {"tomoserve.v1.StoredMatrixArtOptions.stop_relative_residual",
       "[0, 1); 0: run every iteration"},
      {"tomoserve.v1.StoredMatrixArtOptions.views_per_block",
       "0: the matrix format's own choice"},
      {"tomoserve.v1.StatisticalIcdOptions.iterations", "0 means 4"},
      {"tomoserve.v1.IcdWeights.flat_field_photons",
       "photons an unattenuated pixel detects (weights I0 exp(-y))"},
  };
  return *notes;
}

const pb::FieldDescriptor* FindField(const pb::Descriptor* type, const std::string& key) {
  if (type == nullptr) return nullptr;
  if (const pb::FieldDescriptor* field = type->FindFieldByName(key)) return field;
  for (int i = 0; i < type->field_count(); ++i) {
    if (type->field(i)->json_name() == key) return type->field(i);
  }
  // SART's and OS-SART's shared options sit directly in their object in files.
  if (const pb::FieldDescriptor* nested = type->FindFieldByName("iterative")) {
    return FindField(nested->message_type(), key);
  }
  return nullptr;
}

std::string Note(const pb::FieldDescriptor* field) {
  if (field == nullptr) return "";
  auto found = FieldNotes().find(field->full_name());
  if (found != FieldNotes().end()) return found->second;
  if (field->type() == pb::FieldDescriptor::TYPE_ENUM) {
    std::vector<std::string> names;
    for (int i = 0; i < field->enum_type()->value_count(); ++i) {
      names.push_back(field->enum_type()->value(i)->name());
    }
    return absl::StrCat("one of ", absl::StrJoin(names, ", "));
  }
  return "";
}

constexpr size_t kLineWidth = 96;

// Objects of at most four scalars and arrays of scalars go on one line.
bool IsCompact(const Json& value) {
  if (!value.is_object() && !value.is_array()) return true;
  if (value.is_object() && value.size() > 4) return false;
  for (const Json& item : value) {
    if (item.is_object() || item.is_array()) return false;
  }
  return true;
}

std::string CompactText(const Json& value) {
  if (value.is_object()) {
    std::vector<std::string> parts;
    for (const auto& [key, item] : value.items()) {
      parts.push_back(absl::StrCat(Json(key).dump(), ": ", item.dump()));
    }
    return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
  }
  if (value.is_array()) {
    std::vector<std::string> parts;
    for (const Json& item : value) parts.push_back(item.dump());
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
  return value.dump();
}

void Print(const Json& value, const pb::Descriptor* type, int indent, std::string* out);

// One "key": value line (or block) with its note; `last` leaves the comma off.
void PrintMember(const std::string& key, const Json& value, const pb::FieldDescriptor* field,
                 int indent, bool last, std::string* out) {
  const std::string pad(indent, ' ');
  const std::string note = Note(field);
  const std::string comma = last ? "" : ",";
  if (value.is_array() && IsCompact(value) && CompactText(value).size() > kLineWidth) {
    // A long list of numbers (a helical scan's angles): wrapped, several a line.
    if (!note.empty()) absl::StrAppend(out, pad, "// ", note, "\n");
    absl::StrAppend(out, pad, Json(key).dump(), ": [\n");
    std::string line = pad + "  ";
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string item = value[i].dump() + (i + 1 == value.size() ? "" : ",");
      if (line.size() > pad.size() + 2 && line.size() + 1 + item.size() > kLineWidth) {
        absl::StrAppend(out, line, "\n");
        line = pad + "  ";
      }
      absl::StrAppend(&line, line.size() > pad.size() + 2 ? " " : "", item);
    }
    absl::StrAppend(out, line, "\n", pad, "]", comma, "\n");
    return;
  }
  if (IsCompact(value)) {
    absl::StrAppend(out, pad, Json(key).dump(), ": ", CompactText(value), comma,
                    note.empty() ? "" : absl::StrCat("  // ", note), "\n");
    return;
  }
  if (!note.empty()) absl::StrAppend(out, pad, "// ", note, "\n");
  absl::StrAppend(out, pad, Json(key).dump(), ": ");
  const pb::Descriptor* child =
      field != nullptr && field->type() == pb::FieldDescriptor::TYPE_MESSAGE
          ? field->message_type()
          : nullptr;
  Print(value, child, indent, out);
  absl::StrAppend(out, comma, "\n");
}

void Print(const Json& value, const pb::Descriptor* type, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  if (value.is_object()) {
    absl::StrAppend(out, "{\n");
    size_t i = 0;
    for (const auto& [key, item] : value.items()) {
      PrintMember(key, item, FindField(type, key), indent + 2, ++i == value.size(), out);
    }
    absl::StrAppend(out, pad, "}");
    return;
  }
  if (value.is_array() && !IsCompact(value)) {
    absl::StrAppend(out, "[\n");
    for (size_t i = 0; i < value.size(); ++i) {
      absl::StrAppend(out, pad, "  ");
      if (IsCompact(value[i])) {
        absl::StrAppend(out, CompactText(value[i]));
      } else {
        Print(value[i], type, indent + 2, out);
      }
      absl::StrAppend(out, i + 1 == value.size() ? "" : ",", "\n");
    }
    absl::StrAppend(out, pad, "]");
    return;
  }
  absl::StrAppend(out, CompactText(value));
}

}  // namespace

std::string CommentedSpecJson(const tomoserve::v1::JobSpec& spec,
                              const std::vector<std::string>& header) {
  std::string out;
  for (const std::string& line : header) absl::StrAppend(&out, "// ", line, "\n");
  Print(Json::parse(client::JobSpecToJson(spec)), tomoserve::v1::JobSpec::descriptor(), 0, &out);
  return out + "\n";
}

}  // namespace tomo::cli
