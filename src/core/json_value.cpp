#include "core/json_value.h"

#include <nlohmann/json.hpp>

namespace eth {

JsonValue::JsonValue() : v_(std::make_unique<Json>()) {}
JsonValue::JsonValue(const Json& v) : v_(std::make_unique<Json>(v)) {}
JsonValue::JsonValue(Json&& v) : v_(std::make_unique<Json>(std::move(v))) {}
JsonValue::JsonValue(const JsonValue& o) : v_(std::make_unique<Json>(*o)) {}
JsonValue::JsonValue(JsonValue&& o) noexcept = default;
JsonValue& JsonValue::operator=(const JsonValue& o) {
  if (this != &o) v_ = std::make_unique<Json>(*o);
  return *this;
}
JsonValue& JsonValue::operator=(JsonValue&& o) noexcept = default;
JsonValue::~JsonValue() = default;

const Json& JsonValue::operator*() const {
  static const Json null_value;
  return v_ ? *v_ : null_value;
}

Json& JsonValue::operator*() {
  if (!v_) v_ = std::make_unique<Json>();
  return *v_;
}

bool JsonValue::operator==(const JsonValue& o) const { return **this == *o; }

}  // namespace eth
