// Output helpers shared by the subcommands: `--format text|json`, aligned text tables, and
// number formatting a person can read.
#pragma once

#include <string>
#include <vector>

#include "cli/cli_fwd.h"
#include "core/format.h"
#include "core/json_cursor.h"

namespace eth::cli {

enum class Format { Text, Json };

// Adds `--format text|json` to `sub`, bound to `*f`.
void add_format_option(CLI::App* sub, Format* f);

// A text table: header row, then rows; columns are padded to their widest cell. Cells that look
// numeric are right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

using eth::fmt_bytes;                               // core/format.h
using eth::fmt_num;
std::string fmt_ms(double ms);                      // "12.3 ms" / "1.23 s"
void print_json(const Json& j);                     // pretty, to stdout

// Points std::cout at file descriptor 1 through a buffer that remembers the first write error
// (errno), so a full disk under `> file` or /dev/full is reported, not lost at exit. Call once,
// first thing in main.
void install_checked_stdout();
// Flushes std::cout; 0 when everything written reached fd 1, else the errno of the first failure.
int flush_checked_stdout();

}  // namespace eth::cli
