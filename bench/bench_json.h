// Shared by the bench programs that print their figures either as tables or, with
// `--format json`, as one JSON document (scripts/evaluate.sh draws docs/evaluation/ from those):
// the machine's CPU model and load (every figure is printed beside them), and a text table
// printed from the same JSON rows, so the text and the JSON can never disagree.
#pragma once

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"

namespace eth::bench {

// CPU model (/proc/cpuinfo), cores, and the 1/5/15-minute load averages (/proc/loadavg): the
// machine is shared, so measured figures mean little without them.
inline Json machine_info() {
  // The model name alone does not tell this machine kind's CPUs apart (notes: Zen 3 vs Zen 5):
  // the family and the widest vector extension do.
  std::string model = "unknown", family = "?", vector = "none";
  std::ifstream cpu("/proc/cpuinfo");
  auto value = [](const std::string& line) {
    const auto colon = line.find(':');
    return colon == std::string::npos ? std::string() : line.substr(colon + 2);
  };
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("model name", 0) == 0) model = value(line);
    if (line.rfind("cpu family", 0) == 0) family = value(line);
    if (line.rfind("flags", 0) == 0) {
      const std::string f = " " + value(line) + " ";
      vector = f.find(" avx512_bf16 ") != std::string::npos ? "avx512+bf16"
               : f.find(" avx512f ") != std::string::npos   ? "avx512"
               : f.find(" avx2 ") != std::string::npos      ? "avx2"
                                                            : "none";
      break;
    }
  }
  model += " (family " + family + ", " + vector + ")";
  double load[3] = {0, 0, 0};
  std::ifstream la("/proc/loadavg");
  la >> load[0] >> load[1] >> load[2];
  return Json{{"cpu_model", model},
              {"cores", std::thread::hardware_concurrency()},
              {"load_1m", load[0]},
              {"load_5m", load[1]},
              {"load_15m", load[2]}};
}

inline std::string machine_line(const Json& m) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "(machine: %s, %d cores, load %.2f %.2f %.2f)",
                m["cpu_model"].get<std::string>().c_str(), m["cores"].get<int>(),
                m["load_1m"].get<double>(), m["load_5m"].get<double>(),
                m["load_15m"].get<double>());
  return buf;
}

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
