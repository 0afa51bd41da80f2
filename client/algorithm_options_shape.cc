#include "client/algorithm_options_shape.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::client {
namespace {

using Json = nlohmann::ordered_json;
namespace pb = ::google::protobuf;

// The algorithms whose wire options nest IterativeOptions under `iterative`, by the names a
// file may use (proto name, JSON name).
const std::vector<std::string>& NestingAlgorithms() {
  static const auto* names = new std::vector<std::string>{"sart", "os_sart", "osSart"};
  return *names;
}

bool IsIterativeField(const std::string& key) {
  const pb::Descriptor* type = tomoserve::v1::IterativeOptions::descriptor();
  if (type->FindFieldByName(key) != nullptr) return true;
  for (int i = 0; i < type->field_count(); ++i) {
    if (type->field(i)->json_name() == key) return true;
  }
  return false;
}

// The algorithm object of a spec, or null.
Json* AlgorithmObject(Json* spec) {
  if (!spec->is_object()) return nullptr;
  if (spec->contains("algorithm") && (*spec)["algorithm"].is_object()) {
    return &(*spec)["algorithm"];
  }
  return nullptr;
}

}  // namespace

absl::Status NestIterativeOptions(Json* spec) {
  Json* algorithm = AlgorithmObject(spec);
  if (algorithm == nullptr) return absl::OkStatus();
  for (const std::string& name : NestingAlgorithms()) {
    if (!algorithm->contains(name) || !(*algorithm)[name].is_object()) continue;
    Json& options = (*algorithm)[name];
    Json nested = Json::object();
    Json rest = Json::object();
    std::vector<std::string> flat_keys;
    for (const auto& [key, value] : options.items()) {
      if (IsIterativeField(key)) {
        nested[key] = value;
        flat_keys.push_back(key);
      } else {
        rest[key] = value;
      }
    }
    if (flat_keys.empty()) continue;
    if (rest.contains("iterative")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "algorithm.", name == "osSart" ? "os_sart" : name, ": ",
          absl::StrJoin(flat_keys, ", "),
          " given directly and options under \"iterative\" too; give them directly (the "
          "older files' \"iterative\" object is read only alone)"));
    }
    rest["iterative"] = std::move(nested);
    options = std::move(rest);
  }
  return absl::OkStatus();
}

void FlattenIterativeOptions(Json* spec) {
  Json* algorithm = AlgorithmObject(spec);
  if (algorithm == nullptr) return;
  for (const std::string& name : NestingAlgorithms()) {
    if (!algorithm->contains(name) || !(*algorithm)[name].is_object()) continue;
    Json& options = (*algorithm)[name];
    if (!options.contains("iterative") || !options["iterative"].is_object()) continue;
    Json flat = Json::object();
    for (const auto& [key, value] : options["iterative"].items()) flat[key] = value;
    for (const auto& [key, value] : options.items()) {
      if (key != "iterative") flat[key] = value;
    }
    options = std::move(flat);
  }
}

}  // namespace tomo::client
