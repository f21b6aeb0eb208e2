// A JSON value that a struct can hold by value while its header includes only json_fwd.hpp
// (json_cursor.h says why): Plan's predictions and search statistics, a checkpoint's metadata.
// The document lives on the heap; copies are deep; an empty (moved-from) one reads as null.
#pragma once

#include <memory>

#include "core/json_cursor.h"

namespace eth {

class JsonValue {
 public:
  JsonValue();
  // Implicit, so `plan.predicted = Json{...}` reads as it would on a Json member.
  JsonValue(const Json& v);  // NOLINT(google-explicit-constructor)
  JsonValue(Json&& v);       // NOLINT(google-explicit-constructor)
  JsonValue(const JsonValue& o);
  JsonValue(JsonValue&& o) noexcept;
  JsonValue& operator=(const JsonValue& o);
  JsonValue& operator=(JsonValue&& o) noexcept;
  ~JsonValue();

  const Json& operator*() const;
  const Json* operator->() const { return &**this; }
  Json& operator*();
  Json* operator->() { return &**this; }
  bool operator==(const JsonValue& o) const;

 private:
  std::unique_ptr<Json> v_;
};

}  // namespace eth
