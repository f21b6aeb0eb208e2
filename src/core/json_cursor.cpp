#include "core/json_cursor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace eth {

std::string json_brief(const Json& v, std::size_t max_chars) {
  // A string is rendered from its start only, so a 10 MB value is never dumped whole.
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    const Json head = s.size() > max_chars ? Json(s.substr(0, max_chars)) : v;
    std::string out = head.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (s.size() > max_chars) out = out.substr(0, max_chars - 3) + "...";
    return message_text(out, max_chars);
  }
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars - 3) + "...";
  return message_text(s, max_chars);
}

std::string json_path_join(const std::string& base, std::string_view key) {
  constexpr std::size_t kMaxKey = 64;
  std::string k = key.size() > kMaxKey ? message_text(key.substr(0, 32)) + "... (" +
                                             std::to_string(key.size()) + "-byte key)"
                                       : std::string(key);
  return base.empty() ? k : base + "." + k;
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool JsonCursor::is_object() const { return value_->is_object(); }
bool JsonCursor::is_string() const { return value_->is_string(); }
bool JsonCursor::is_array() const { return value_->is_array(); }

JsonCursor::JsonCursor(const Json& value, JsonOrigin origin)
    : value_(&value), origin_(std::move(origin)) {}

JsonCursor JsonCursor::child(std::string path, const Json& v) const {
  return JsonCursor(v, JsonOrigin{origin_.component, origin_.source, std::move(path)});
}

void JsonCursor::fail(const std::string& expected) const {
  throw InputError(origin_.component, origin_.source, origin_.path.empty() ? "(root)" : origin_.path,
                   "expected " + expected + ", got " + json_brief(*value_));
}

void JsonCursor::fail_detail(const std::string& detail) const {
  throw InputError(origin_.component, origin_.source, origin_.path.empty() ? "(root)" : origin_.path,
                   detail);
}

void JsonCursor::require_object() const {
  if (!value_->is_object()) fail("an object");
}

JsonCursor JsonCursor::at(std::string_view key) const {
  require_object();
  auto it = value_->find(std::string(key));
  std::string p = json_path_join(origin_.path, key);
  if (it == value_->end()) {
    throw InputError(origin_.component, origin_.source, p, "missing required field");
  }
  return child(std::move(p), *it);
}

std::optional<JsonCursor> JsonCursor::find(std::string_view key) const {
  require_object();
  auto it = value_->find(std::string(key));
  if (it == value_->end()) return std::nullopt;
  std::string p = json_path_join(origin_.path, key);
  return child(std::move(p), *it);
}

void JsonCursor::allow_only(std::initializer_list<std::string_view> allowed) const {
  require_object();
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
    std::string list;
    for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    std::string p = json_path_join(origin_.path, it.key());
    throw InputError(origin_.component, origin_.source, p,
                     "unknown field; expected one of: " + list);
  }
}

std::vector<std::string> JsonCursor::keys() const {
  require_object();
  std::vector<std::string> out;
  for (auto it = value_->begin(); it != value_->end(); ++it) out.push_back(it.key());
  return out;
}

std::vector<std::pair<std::string, JsonCursor>> JsonCursor::members() const {
  require_object();
  std::vector<std::pair<std::string, JsonCursor>> out;
  out.reserve(value_->size());
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    out.emplace_back(it.key(), child(json_path_join(origin_.path, it.key()), it.value()));
  }
  return out;
}

std::size_t JsonCursor::size() const {
  if (!value_->is_array()) fail("an array");
  return value_->size();
}

JsonCursor JsonCursor::operator[](std::size_t i) const {
  if (!value_->is_array()) fail("an array");
  ETH_CHECK(i < value_->size(), "JSON array index out of range");
  return child(origin_.path + "[" + std::to_string(i) + "]", (*value_)[i]);
}

std::int64_t JsonCursor::as_int(std::int64_t min, std::int64_t max) const {
  std::int64_t v = 0;
  if (value_->is_number_integer()) {
    if (value_->is_number_unsigned() &&
        value_->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      fail("an integer in range");
    }
    v = value_->get<std::int64_t>();
  } else {
    fail("an integer");
  }
  if (v < min || v > max) {
    std::string range;
    if (min != INT64_MIN && max != INT64_MAX) {
      range = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    } else if (min != INT64_MIN) {
      range = "an integer >= " + std::to_string(min);
    } else {
      range = "an integer <= " + std::to_string(max);
    }
    fail(range);
  }
  return v;
}

double JsonCursor::as_number(double min, double max) const {
  if (!value_->is_number()) fail("a number");
  double v = value_->get<double>();
  if (!std::isfinite(v) || v < min || v > max) {
    fail("a number in [" + number_text(min) + ", " + number_text(max) + "]");
  }
  return v;
}

double JsonCursor::as_positive_number(double max) const {
  const std::string expected = max < 1e308 ? "a positive number <= " + number_text(max)
                                           : std::string("a positive number");
  if (!value_->is_number()) fail(expected);
  double v = value_->get<double>();
  if (!std::isnormal(v) || v <= 0 || v > max) fail(expected);
  return v;
}

double JsonCursor::as_quantity(double min, double max, bool allow_zero) const {
  const std::string expected = "a number in [" + number_text(min) + ", " + number_text(max) + "]" +
                               (allow_zero ? " or 0" : "");
  if (!value_->is_number()) fail(expected);
  const double v = value_->get<double>();
  if (allow_zero && v == 0) return 0;
  if (!std::isnormal(v) || v < min || v > max) fail(expected);
  return v;
}

std::string JsonCursor::as_string() const {
  if (!value_->is_string()) fail("a string");
  return value_->get<std::string>();
}

bool JsonCursor::as_bool() const {
  if (!value_->is_boolean()) fail("true or false");
  return value_->get<bool>();
}

}  // namespace eth
