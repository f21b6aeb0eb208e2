// Shared by the bench programs that print their figures either as tables or, with
// `--format json`, as one JSON document (scripts/evaluate.sh draws docs/evaluation/ from those):
// a text table printed from the same JSON rows, so the text and the JSON can never disagree.
// The machine line every figure is printed beside is bench_util.h's.
#pragma once

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"

namespace eth::bench {

// One column of a text table: a header, the dotted path of the value inside a row
// ("methods.eth.iteration_ms") and a printf format for numbers (strings print as they are).
struct Column {
  const char* header;
  const char* path;
  const char* format = "%.3f";
};

inline const Json* at_path(const Json& row, const std::string& path) {
  const Json* j = &row;
  std::stringstream ss(path);
  for (std::string key; std::getline(ss, key, '.');) {
    if (!j->is_object() || !j->contains(key)) return nullptr;
    j = &(*j)[key];
  }
  return j;
}

inline std::string cell(const Json& row, const Column& c) {
  const Json* j = at_path(row, c.path);
  if (j == nullptr || j->is_null()) return "-";
  if (j->is_string()) return j->get<std::string>();
  if (j->is_boolean()) return j->get<bool>() ? "yes" : "no";
  char buf[64];
  if (j->is_number_integer()) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(j->get<std::int64_t>()));
  } else {
    std::snprintf(buf, sizeof buf, c.format, j->get<double>());
  }
  return buf;
}

// Right-aligned columns as wide as their widest cell; the first column left-aligned.
inline void print_rows(const Json& rows, const std::vector<Column>& cols) {
  std::vector<std::vector<std::string>> cells(1);
  for (const auto& c : cols) cells[0].push_back(c.header);
  for (const auto& r : rows) {
    cells.emplace_back();
    for (const auto& c : cols) cells.back().push_back(cell(r, c));
  }
  std::vector<std::size_t> width(cols.size(), 0);
  for (const auto& line : cells) {
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  }
  for (const auto& line : cells) {
    std::string out;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const std::string pad(width[i] - line[i].size(), ' ');
      out += i == 0 ? line[i] + pad : "  " + pad + line[i];
    }
    std::printf("%s\n", out.c_str());
  }
}

}  // namespace eth::bench
