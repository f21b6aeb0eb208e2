// The schedule IR's text form: it round-trips through parse_schedule_text, and malformed text is
// refused naming the line and token. (Generators, passes and the validator have their own
// files: generate_test.cpp, lower_test.cpp, validate_test.cpp.)
#include "schedule/schedule.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "schedule/generate.h"
#include "schedule/lower.h"

namespace eth {
namespace {

TEST(Schedule, TextFormRoundTrips) {
  Schedule s = make_1f1b(4, 6);
  insert_p2p(s);
  append_reductions(s, {{0}, {1, 2}, {3}, {}});
  const std::string text = format_schedule(s);
  EXPECT_EQ(parse_schedule_text(text), s);
  EXPECT_EQ(format_schedule(make_1f1b(2, 3)), "s0: F0 F1 B0 F2 B1 B2\ns1: F0 B0 F1 B1 F2 B2\n");
}

TEST(Schedule, MalformedTextNamesLineAndToken) {
  try {
    parse_schedule_text("s0: F0 B0\ns1: F0 X0 B0\n");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "line 2");
    EXPECT_NE(std::string(e.what()).find("X0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_schedule_text("s1: F0 B0\n"), InputError);  // must start at s0
  EXPECT_THROW(parse_schedule_text("s0: F B0\n"), InputError);   // index missing
}

}  // namespace
}  // namespace eth
