#include "core/error.h"

#include <cstdio>
#include <cstdlib>

namespace eth {

namespace {
std::string compose(const std::string& component, const std::string& source,
                    const std::string& path, const std::string& detail) {
  std::string out = component.empty() ? "" : "[" + component + "] ";
  if (!source.empty()) out += source + ": ";
  if (!path.empty()) out += path + ": ";
  return out + detail;
}

std::string join(const std::vector<InputError>& errors) {
  std::string out;
  for (std::size_t i = 0; i < errors.size(); ++i) {
    if (i) out += "\n";
    out += errors[i].what();
  }
  return out;
}
}  // namespace

InputError::InputError(std::string component, std::string source, std::string path,
                       std::string detail)
    : std::runtime_error(compose(component, source, path, detail)),
      component_(std::move(component)),
      source_(std::move(source)),
      path_(std::move(path)),
      detail_(std::move(detail)) {}

InputErrors::InputErrors(const std::vector<InputError>& errors)
    : InputError("", "", "", join(errors)),
      errors_(errors) {}

void check_failed(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "ETH_CHECK failed at %s:%d: %s\n  %s\n", file, line, cond, msg.c_str());
  std::abort();
}

}  // namespace eth
