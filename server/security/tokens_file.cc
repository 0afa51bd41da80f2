#include "server/security/tokens_file.h"

#include "absl/strings/str_cat.h"
#include "server/security/secret_file.h"
#include "server/telemetry/log.h"

namespace tomo::server {

absl::StatusOr<TokenTable> ReadTokensFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSecretFile("--tokens_file", path);
  if (!text.ok()) return text.status();
  return TokenTable::Parse(*text, absl::StrCat("--tokens_file=", path));
}

absl::StatusOr<std::unique_ptr<TokensFile>> TokensFile::Open(const std::string& path) {
  absl::StatusOr<TokenTable> table = ReadTokensFile(path);
  if (!table.ok()) return table.status();
  return std::unique_ptr<TokensFile>(new TokensFile(path, std::move(*table)));
}

absl::Status TokensFile::Reload() {
  absl::StatusOr<TokenTable> table = ReadTokensFile(path_);
  if (!table.ok()) {
    Log(absl::StrCat("tokens not reloaded, the ", size(), " tokens in force stay: ",
                     table.status().message()),
        LogLevel::kWarning);
    return table.status();
  }
  const size_t tokens = table->size();
  const size_t tenants = table->tenant_count();
  {
    absl::MutexLock lock(&mu_);
    table_ = std::make_shared<const TokenTable>(std::move(*table));
  }
  Log(absl::StrCat("tokens reloaded from --tokens_file=", path_, ": ", tokens, " tokens of ",
                   tenants, " tenants"));
  return absl::OkStatus();
}

std::optional<Principal> TokensFile::Find(absl::string_view token) const {
  std::shared_ptr<const TokenTable> table;
  {
    absl::MutexLock lock(&mu_);
    table = table_;
  }
  return table->Find(token);
}

size_t TokensFile::size() const {
  absl::MutexLock lock(&mu_);
  return table_->size();
}

}  // namespace tomo::server
