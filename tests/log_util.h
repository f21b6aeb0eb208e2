// What the tool leaves behind for the tests that run it: the losses of an `eth train --log`
// file and how often a message occurs in its output. Test-only.
#pragma once

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "test_util.h"

namespace eth::test {

// The "loss" of every line of a --log file, in file order.
inline std::vector<double> log_losses(const std::filesystem::path& log) {
  std::vector<double> v;
  std::istringstream lines(slurp(log));
  for (std::string line; std::getline(lines, line);) v.push_back(Json::parse(line)["loss"]);
  return v;
}

// How many times `what` occurs in `text`, overlapping occurrences included.
inline int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

}  // namespace eth::test
