#include "client/json_fields_check.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/nearest_name.h"

namespace tomo::client {
namespace {

namespace pb = ::google::protobuf;
using Json = nlohmann::ordered_json;

std::string Join(const std::string& path, const std::string& name) {
  return path.empty() ? name : absl::StrCat(path, ".", name);
}

// The longest prefix ending in '_' that every value name shares ("DETECTOR_SHAPE_").
std::string CommonPrefix(const pb::EnumDescriptor* type) {
  if (type->value_count() == 0) return "";
  std::string prefix = type->value(0)->name();
  for (int i = 1; i < type->value_count(); ++i) {
    const std::string& name = type->value(i)->name();
    size_t n = 0;
    while (n < prefix.size() && n < name.size() && prefix[n] == name[n]) ++n;
    prefix.resize(n);
  }
  const size_t underscore = prefix.rfind('_');
  return underscore == std::string::npos ? "" : prefix.substr(0, underscore + 1);
}

absl::Status CheckObject(const Json& object, const pb::Descriptor* type, const std::string& path);

absl::Status CheckValue(const Json& value, const pb::FieldDescriptor* field,
                        const std::string& path) {
  if (field->type() == pb::FieldDescriptor::TYPE_MESSAGE) {
    if (!value.is_object()) return absl::OkStatus();
    if (absl::StartsWith(field->message_type()->full_name(), "google.protobuf.")) {
      return absl::OkStatus();
    }
    return CheckObject(value, field->message_type(), path);
  }
  if (field->type() == pb::FieldDescriptor::TYPE_ENUM && value.is_string()) {
    const pb::EnumDescriptor* type = field->enum_type();
    const std::string name = value.get<std::string>();
    if (type->FindValueByName(name) != nullptr) return absl::OkStatus();
    std::vector<std::string> names;
    for (int i = 0; i < type->value_count(); ++i) names.push_back(type->value(i)->name());
    std::string message = absl::StrCat(path, ": \"", name, "\" is not a ", type->full_name(),
                                       "; allowed: ", absl::StrJoin(names, ", "));
    if (std::optional<std::string> nearest = NearestName(name, names, CommonPrefix(type))) {
      absl::StrAppend(&message, " (did you mean ", *nearest, "?)");
    }
    return absl::InvalidArgumentError(message);
  }
  return absl::OkStatus();
}

absl::Status CheckObject(const Json& object, const pb::Descriptor* type, const std::string& path) {
  for (const auto& [key, value] : object.items()) {
    const pb::FieldDescriptor* field = type->FindFieldByName(key);
    if (field == nullptr) {
      for (int i = 0; i < type->field_count() && field == nullptr; ++i) {
        if (type->field(i)->json_name() == key) field = type->field(i);
      }
    }
    if (field == nullptr) {
      // Candidates: the type's fields; for SART and OS-SART, whose files give the shared
      // iterative options directly (client/algorithm_options_shape.h), those options'
      // fields rather than "iterative" itself.
      std::vector<std::string> names;
      std::vector<const pb::Descriptor*> types = {type};
      if (const pb::FieldDescriptor* nested = type->FindFieldByName("iterative");
          nested != nullptr && nested->message_type() != nullptr) {
        types.push_back(nested->message_type());
      }
      for (const pb::Descriptor* t : types) {
        for (int i = 0; i < t->field_count(); ++i) {
          if (t->field(i)->name() == "iterative") continue;
          names.push_back(t->field(i)->name());
          names.push_back(t->field(i)->json_name());
        }
      }
      std::string message = absl::StrCat(Join(path, key), ": no field \"", key, "\" in ",
                                         type->full_name());
      if (std::optional<std::string> nearest = NearestName(key, names)) {
        absl::StrAppend(&message, "; did you mean \"", *nearest, "\"?");
      } else {
        std::vector<std::string> fields;
        for (int i = 0; i < type->field_count(); ++i) fields.push_back(type->field(i)->name());
        absl::StrAppend(&message, "; its fields: ", absl::StrJoin(fields, ", "));
      }
      return absl::InvalidArgumentError(message);
    }
    const std::string field_path = Join(path, field->name());
    if (field->is_repeated() && value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        absl::Status checked = CheckValue(value[i], field, absl::StrCat(field_path, "[", i, "]"));
        if (!checked.ok()) return checked;
      }
      continue;
    }
    absl::Status checked = CheckValue(value, field, field_path);
    if (!checked.ok()) return checked;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJsonFields(const Json& document, const pb::Descriptor* type) {
  if (!document.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a JSON object (a ", type->full_name(), "), found ",
                     document.type_name()));
  }
  return CheckObject(document, type, "");
}

}  // namespace tomo::client
