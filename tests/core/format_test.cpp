// The figures people read: fixed-point numbers with the asked precision, and byte counts in
// decimal units (10^3 steps, one decimal above bytes), each checked against text written here.
#include "core/format.h"

#include <gtest/gtest.h>

namespace eth::format_test {
namespace {

TEST(Format, NumbersAreFixedPointWithTrailingZerosKept) {
  EXPECT_EQ(fmt_num(3.0), "3.00");
  EXPECT_EQ(fmt_num(2.5, 0), "2");  // round half to even, as printf does
  EXPECT_EQ(fmt_num(3.14159, 3), "3.142");
  EXPECT_EQ(fmt_num(-0.125, 2), "-0.12");
  EXPECT_EQ(fmt_num(1234567.0, 1), "1234567.0");
}

TEST(Format, BytesStepByThousandsWithOneDecimalAboveBytes) {
  EXPECT_EQ(fmt_bytes(0), "0 B");
  EXPECT_EQ(fmt_bytes(512), "512 B");
  EXPECT_EQ(fmt_bytes(999), "999 B");
  EXPECT_EQ(fmt_bytes(1000), "1.0 KB");
  EXPECT_EQ(fmt_bytes(30e6), "30.0 MB");
  EXPECT_EQ(fmt_bytes(12.34e9), "12.3 GB");
  EXPECT_EQ(fmt_bytes(80e9), "80.0 GB");
  EXPECT_EQ(fmt_bytes(2.5e12), "2.5 TB");
  // Terabytes are the largest unit: a petabyte reads as a thousand of them.
  EXPECT_EQ(fmt_bytes(3e15), "3000.0 TB");
  // A negative figure keeps its sign and unit.
  EXPECT_EQ(fmt_bytes(-1.5e9), "-1.5 GB");
}

}  // namespace
}  // namespace eth::format_test
