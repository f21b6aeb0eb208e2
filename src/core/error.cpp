#include "core/error.h"

#include <algorithm>
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

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }
}  // namespace

std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (RFC 3629 table)
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (!continuation(at(i + k))) return 0;
  }
  return n;
}

std::string message_text(std::string_view text, std::size_t max_bytes, bool keep_newlines) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 16);
  std::size_t i = 0;
  while (i < text.size()) {
    if (out.size() >= max_bytes) {
      out += "... (" + std::to_string(text.size()) + " bytes)";
      return out;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' && keep_newlines) {
      out += '\n';
    } else if (c == '\0') {
      out += "\\0";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else if (const std::size_t n = utf8_sequence_length(text, i); n > 0) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
    ++i;
  }
  return out;
}

InputError::InputError(std::string component, std::string source, std::string path,
                       std::string detail)
    : InputError(Joined{}, "") {
  component_ = message_text(component, kMaxMessagePartBytes);
  source_ = message_text(source, kMaxMessagePartBytes);
  path_ = message_text(path, kMaxMessagePartBytes);
  detail_ = message_text(detail, kMaxMessageDetailBytes, true);
  static_cast<std::runtime_error&>(*this) =
      std::runtime_error(compose(component_, source_, path_, detail_));
}

InputError::InputError(Joined, std::string message) : std::runtime_error(message) {
  detail_ = std::move(message);
}

InputErrors::InputErrors(const std::vector<InputError>& errors)
    : InputError(Joined{}, join(errors)), errors_(errors) {}

void check_failed(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "ETH_CHECK failed at %s:%d: %s\n  %s\n", file, line, cond,
               message_text(msg, 4096, true).c_str());
  std::abort();
}

}  // namespace eth
