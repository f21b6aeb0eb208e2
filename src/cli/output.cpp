#include "cli/output.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

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

std::string fmt_ms(double ms) {
  if (ms >= 10000.0) return fmt_num(ms / 1000.0, 2) + " s";
  return fmt_num(ms, ms < 10 ? 3 : 1) + " ms";
}

// Invalid UTF-8 (a file name from the command line, say) is replaced, never thrown on: the
// values ETH itself reads are valid UTF-8 by the time they get here (core/json_file.h).
namespace {

class CheckedStdout : public std::streambuf {
 public:
  CheckedStdout() { setp(buf_, buf_ + sizeof buf_); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* p = pbase();
    std::size_t n = static_cast<std::size_t>(pptr() - pbase());
    while (n > 0 && error_ == 0) {
      const ssize_t w = ::write(1, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error_ = w < 0 ? errno : EIO;
        break;
      }
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    setp(buf_, buf_ + sizeof buf_);  // what could not be written is dropped, the error kept
    return error_ == 0;
  }
  char buf_[1 << 16];
  int error_ = 0;
};

CheckedStdout* g_stdout = nullptr;

}  // namespace

void install_checked_stdout() {
  // Never destroyed: std::cout is flushed once more by the library's own exit handlers, after
  // function-local statics are gone.
  g_stdout = new CheckedStdout;
  std::cout.rdbuf(g_stdout);
}

int flush_checked_stdout() {
  std::cout.flush();
  if (g_stdout == nullptr) return std::cout.good() ? 0 : EIO;
  return g_stdout->error() != 0 ? g_stdout->error() : (std::cout.good() ? 0 : EIO);
}

void print_json(const Json& j) {
  std::cout << j.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

}  // namespace eth::cli
