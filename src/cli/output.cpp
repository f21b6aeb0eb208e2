#include "cli/output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace eth::cli {

void add_format_option(CLI::App* sub, Format* f) {
  std::map<std::string, Format> names{{"text", Format::Text}, {"json", Format::Json}};
  sub->add_option("--format", *f, "Output format: text (for people) or json (for scripts)")
      ->transform(CLI::CheckedTransformer(names, CLI::ignore_case))
      ->default_str("text");
}

namespace {
// A number, optionally followed by a space and a unit ("12.5 GB"): right-aligned in tables.
bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end != s.c_str() && (*end == '\0' || *end == ' ' || *end == 'x' || *end == '%');
}
}  // namespace

std::string Table::render() const {
  std::vector<std::size_t> width(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  };
  widen(header_);
  for (const auto& r : rows_) widen(r);
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& row, bool is_header) {
    for (std::size_t i = 0; i < width.size(); ++i) {
      std::string cell = i < row.size() ? row[i] : "";
      std::size_t pad = width[i] - cell.size();
      bool right = !is_header && looks_numeric(cell);
      if (i) out << "  ";
      if (right) out << std::string(pad, ' ') << cell;
      else if (i + 1 < width.size()) out << cell << std::string(pad, ' ');
      else out << cell;
    }
    out << "\n";
  };
  line(header_, true);
  std::size_t total = 0;
  for (auto w : width) total += w;
  total += 2 * (width.empty() ? 0 : width.size() - 1);
  out << std::string(total, '-') << "\n";
  for (const auto& r : rows_) line(r, false);
  return out.str();
}

std::string fmt_num(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

std::string fmt_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (std::fabs(bytes) >= 1000.0 && u < 4) {
    bytes /= 1000.0;
    ++u;
  }
  return fmt_num(bytes, u == 0 ? 0 : 1) + " " + units[u];
}

std::string fmt_ms(double ms) {
  if (ms >= 10000.0) return fmt_num(ms / 1000.0, 2) + " s";
  return fmt_num(ms, ms < 10 ? 3 : 1) + " ms";
}

// Invalid UTF-8 (a file name from the command line, say) is replaced, never thrown on: the
// values ETH itself reads are valid UTF-8 by the time they get here (core/json_file.h).
void print_json(const Json& j) {
  std::cout << j.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

}  // namespace eth::cli
