// Strict, path-tracking reads of a parsed JSON document. Every failure throws InputError naming
// the file, the JSON path and what was expected; objects reject keys nobody asked for.
// Not a schema engine: each loader states its own fields in code.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// The declarations only: json.hpp costs about 1.7 s of compile per TU at -O2 and this header is
// in nearly every TU, so only the files that touch a Json's members include it (JsonValue, below,
// lets a struct hold one without it).
#include <nlohmann/json_fwd.hpp>

namespace eth {

using Json = nlohmann::ordered_json;

// Where a value came from: component tag ("plan"), source (file name) and JSON path.
struct JsonOrigin {
  std::string component;
  std::string source;
  std::string path;  // empty for the document root
};

class JsonCursor {
 public:
  JsonCursor(const Json& value, JsonOrigin origin);

  const Json& value() const { return *value_; }
  const JsonOrigin& origin() const { return origin_; }
  const std::string& path() const { return origin_.path; }

  bool is_object() const;
  bool is_string() const;
  bool is_array() const;

  // Object access. `require_object` must be called first where a value must be an object;
  // `at` fails when the key is missing; `find` returns nullopt.
  void require_object() const;
  JsonCursor at(std::string_view key) const;
  std::optional<JsonCursor> find(std::string_view key) const;
  // Fails on any key not in `allowed`, naming the first unknown one and listing the allowed.
  void allow_only(std::initializer_list<std::string_view> allowed) const;
  std::vector<std::string> keys() const;
  // Every member in file order, each with its path: one pass, where keys() followed by at()
  // would search the object once per key (quadratic in a large object).
  std::vector<std::pair<std::string, JsonCursor>> members() const;

  // Arrays.
  std::size_t size() const;  // requires an array
  JsonCursor operator[](std::size_t i) const;

  // Scalars with range checks. Integers must be integral JSON numbers (2.0 is refused).
  std::int64_t as_int(std::int64_t min = INT64_MIN, std::int64_t max = INT64_MAX) const;
  // Finite numbers in [min, max]. Range messages print the bounds with %g.
  double as_number(double min = -1e308, double max = 1e308) const;
  // A normal (not subnormal) number > 0 and <= max: speeds, bandwidths, memories, factors.
  double as_positive_number(double max = 1e308) const;
  // A physical quantity: a normal number in [min, max] (min > 0), or exactly 0 when allow_zero.
  // Subnormal values (5e-324) are refused: dividing by one overflows to infinity.
  double as_quantity(double min, double max, bool allow_zero = false) const;
  std::string as_string() const;
  bool as_bool() const;

  [[noreturn]] void fail(const std::string& expected) const;  // "expected X, got <value>"
  [[noreturn]] void fail_detail(const std::string& detail) const;  // detail verbatim

 private:
  JsonCursor child(std::string path, const Json& v) const;
  const Json* value_;
  JsonOrigin origin_;
};

// A short, single-line rendering of a JSON value for error messages.
std::string json_brief(const Json& v, std::size_t max_chars = 60);

// `base` + "." + key (or key alone when base is empty), with a key longer than 64 bytes elided:
// JSON paths end up in messages, and a 10 MB key must not.
std::string json_path_join(const std::string& base, std::string_view key);

// A number for messages: %g, so 1e-06 and 1e+06 rather than 0.000001 and 1000000.000000.
std::string number_text(double v);

}  // namespace eth
