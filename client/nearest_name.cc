#include "client/nearest_name.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace tomo::client {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> NearestName(absl::string_view wanted,
                                       const std::vector<std::string>& candidates,
                                       absl::string_view strip_prefix) {
  const std::string lower_wanted = absl::AsciiStrToLower(wanted);
  const std::string lower_prefix = absl::AsciiStrToLower(strip_prefix);
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& candidate : candidates) {
    const std::string lower = absl::AsciiStrToLower(candidate);
    std::vector<absl::string_view> forms = {lower};
    if (!lower_prefix.empty() && absl::StartsWith(lower, lower_prefix)) {
      forms.push_back(absl::string_view(lower).substr(lower_prefix.size()));
    }
    for (absl::string_view form : forms) {
      const size_t distance = EditDistance(lower_wanted, form);
      const size_t allowed = std::max<size_t>(1, std::max(lower_wanted.size(), form.size()) / 3);
      if (distance <= allowed && (!best || distance < best_distance)) {
        best = candidate;
        best_distance = distance;
      }
    }
  }
  return best;
}

}  // namespace tomo::client
