// The output helpers (cli/output.h): --format's two names in any case and the refusal of others,
// a text table laid out as written here by hand (numbers right-aligned, text left, the last
// column unpadded), and the millisecond format's switch to seconds.
#include "cli/output.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

namespace eth::output_test {
namespace {

cli::Format parse_format(const std::string& line) {
  CLI::App app;
  cli::Format f = cli::Format::Text;
  cli::add_format_option(&app, &f);
  app.parse(line, false);
  return f;
}

TEST(Output, FormatFlag) {
  EXPECT_EQ(parse_format(""), cli::Format::Text);
  EXPECT_EQ(parse_format("--format json"), cli::Format::Json);
  EXPECT_EQ(parse_format("--format JSON"), cli::Format::Json);
  EXPECT_EQ(parse_format("--format text"), cli::Format::Text);
  EXPECT_THROW(parse_format("--format xml"), CLI::ValidationError);
}

TEST(Output, TableAlignsNumbersRightAndTextLeft) {
  cli::Table t({"name", "size", "note"});
  t.add({"alpha", "12.5 GB", "first"});
  t.add({"b", "3", "x"});
  t.add({"gamma-long", "n/a", ""});
  t.add({"d"});  // a short row: the missing cells are empty
  EXPECT_EQ(t.render(),
            "name        size     note\n"
            "--------------------------\n"
            "alpha       12.5 GB  first\n"
            "b                 3  x\n"
            "gamma-long  n/a      \n"
            "d                    \n");
}

TEST(Output, MillisecondsSwitchToSecondsAtTen) {
  EXPECT_EQ(cli::fmt_ms(1.5), "1.500 ms");
  EXPECT_EQ(cli::fmt_ms(12.34), "12.3 ms");
  EXPECT_EQ(cli::fmt_ms(9999), "9999.0 ms");
  EXPECT_EQ(cli::fmt_ms(12500), "12.50 s");
}

}  // namespace
}  // namespace eth::output_test
