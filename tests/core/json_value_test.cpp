// JsonValue (core/json_value.h) behaves as the Json member it replaces in Plan and
// CheckpointMeta: null by default, deep copies, equality by content, and a moved-from value that
// reads as null and can be written again.
#include <gtest/gtest.h>

#include <utility>

#include <nlohmann/json.hpp>

#include "core/json_value.h"

namespace eth {
namespace {

TEST(JsonValue, DefaultIsNull) {
  const JsonValue v;
  EXPECT_TRUE(v->is_null());
  EXPECT_EQ(v, JsonValue(Json()));
}

TEST(JsonValue, CopiesAreDeep) {
  JsonValue a = Json{{"iteration_ms", 12.5}};
  JsonValue b = a;
  (*b)["iteration_ms"] = 3.0;
  EXPECT_EQ(a->at("iteration_ms").get<double>(), 12.5);
  EXPECT_EQ(b->at("iteration_ms").get<double>(), 3.0);
  EXPECT_NE(a, b);
  a = b;
  (*b)["extra"] = true;
  EXPECT_FALSE(a->contains("extra"));
}

TEST(JsonValue, EqualityIsByContent) {
  EXPECT_EQ(JsonValue(Json::parse(R"({"a": [1, 2]})")), JsonValue(Json{{"a", {1, 2}}}));
  EXPECT_NE(JsonValue(Json{{"a", 1}}), JsonValue(Json{{"a", 2}}));
  EXPECT_NE(JsonValue(Json::object()), JsonValue());  // {} is not null
}

TEST(JsonValue, MovedFromReadsAsNullAndTakesANewValue) {
  JsonValue a = Json{{"k", "v"}};
  const JsonValue b = std::move(a);
  EXPECT_EQ(b->at("k").get<std::string>(), "v");
  const JsonValue& ca = a;  // NOLINT(bugprone-use-after-move): the state under test
  EXPECT_TRUE(ca->is_null());
  EXPECT_EQ(ca, JsonValue());
  (*a)["k"] = 2;
  EXPECT_EQ(a->at("k").get<int>(), 2);
  EXPECT_EQ(b->at("k").get<std::string>(), "v");
}

}  // namespace
}  // namespace eth
