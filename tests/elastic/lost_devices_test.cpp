// The lost-devices file and hostfile arithmetic: ids, ranges, commas and comments, refusals
// naming the file and line, appending keeps the person's text, and on random clusters, sets and
// files the results equal a brute-force recomputation written here (device by device).
#include "elastic/lost_devices.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_spec.h"
#include "test_util.h"

namespace eth::lost_devices_test {
namespace {

using test::error_of;

ClusterSpec nodes_of(const std::vector<std::int64_t>& sizes) {
  ClusterSpec c;
  c.name = "random";
  for (std::int64_t n : sizes) c.nodes.push_back(NodeSpec{"A100", n});
  return c;
}

TEST(LostDevices, IdsRangesCommasAndComments) {
  const ClusterSpec full = load_cluster("13b-910b2-910b4");  // 64 devices
  const std::string text = "# node 1 is being serviced\n8-15\n\n2, 40 # and two more\n  63\n";
  std::set<std::int64_t> want{2, 40, 63};
  for (std::int64_t d = 8; d <= 15; ++d) want.insert(d);
  EXPECT_EQ(parse_lost_devices(text, "lost.txt", full), want);
  EXPECT_TRUE(parse_lost_devices("", "lost.txt", full).empty());
  EXPECT_TRUE(parse_lost_devices("# nothing\n", "lost.txt", full).empty());
}

TEST(LostDevices, RefusesWhatIsNotADeviceNamingTheLine) {
  const ClusterSpec full = load_cluster("cpu-emulated");  // 4 devices
  const std::string bad_word = error_of([&] { parse_lost_devices("1\nthree\n", "l.txt", full); });
  EXPECT_NE(bad_word.find("l.txt"), std::string::npos) << bad_word;
  EXPECT_NE(bad_word.find("line 2"), std::string::npos) << bad_word;
  EXPECT_NE(bad_word.find("\"three\""), std::string::npos) << bad_word;
  EXPECT_NE(error_of([&] { parse_lost_devices("3-1", "l.txt", full); }).find("A <= B"),
            std::string::npos);
  const std::string outside = error_of([&] { parse_lost_devices("\n\n4\n", "l.txt", full); });
  EXPECT_NE(outside.find("line 3"), std::string::npos) << outside;
  EXPECT_NE(outside.find("ids 0..3"), std::string::npos) << outside;
  EXPECT_NE(error_of([&] { parse_lost_devices("-1", "l.txt", full); }).find("not in the devices"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_lost_devices("2-", "l.txt", full); }).find("expected"),
            std::string::npos);
}

TEST(LostDevices, AddingADeviceKeepsWhatThePersonWrote) {
  const ClusterSpec full = load_cluster("cpu-emulated");
  for (const std::string& text : {std::string(""), std::string("# mine\n0"),
                                 std::string("0 # mine\n")}) {
    const std::string out = add_lost_device(text, 3, "rank 3 killed by SIGKILL at step 12");
    EXPECT_EQ(out.rfind(text, 0), 0u) << "the person's text comes first, unchanged";
    std::set<std::int64_t> want = parse_lost_devices(text, "l", full);
    want.insert(3);
    EXPECT_EQ(parse_lost_devices(out, "l", full), want) << out;
  }
}

TEST(LostDevices, RangesPrintAsTheFileWritesThem) {
  const ClusterSpec full = load_cluster("13b-910b2-910b4");
  const std::set<std::int64_t> ids{2, 4, 5, 6, 7, 9};
  EXPECT_EQ(device_ranges(ids), "2, 4-7, 9");
  EXPECT_EQ(parse_lost_devices(device_ranges(ids), "l", full), ids);
  EXPECT_EQ(device_ranges({}), "");
}

TEST(LostDevices, AHostGoneFromTheHostfileTakesItsNodesDevices) {
  const ClusterSpec full = load_cluster("cpu-emulated");  // node 0: 0-1, node 1: 2-3
  const std::vector<std::string> hosts{"a", "b"};
  EXPECT_EQ(devices_of_missing_hosts(full, hosts, {"a"}), (std::set<std::int64_t>{2, 3}));
  EXPECT_EQ(devices_of_missing_hosts(full, hosts, {"b"}), (std::set<std::int64_t>{0, 1}));
  EXPECT_TRUE(devices_of_missing_hosts(full, hosts, {"b", "a", "c"}).empty());
  // A node without a host at the start has no host to come back on.
  EXPECT_EQ(devices_of_missing_hosts(full, {"a"}, {"a", "b"}), (std::set<std::int64_t>{2, 3}));
}

TEST(LostDevices, MissingHostsEqualABruteForceOverEveryDevice) {
  std::mt19937 rng(27);
  const std::vector<std::string> names{"h0", "h1", "h2", "h3", "h4"};
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::int64_t> sizes(1 + rng() % 6);
    for (auto& n : sizes) n = 1 + static_cast<std::int64_t>(rng() % 8);
    const ClusterSpec c = nodes_of(sizes);
    // A hostfile of up to one more host than nodes (some nodes may have none), and the hosts
    // present now, any subset of the names (some never in the hostfile).
    std::vector<std::string> hosts(rng() % (sizes.size() + 2));
    for (auto& h : hosts) h = names[rng() % names.size()];
    std::vector<std::string> present;
    for (const auto& h : names) {
      if (rng() % 2) present.push_back(h);
    }
    // Device d belongs to the node whose cumulative count first passes d.
    std::set<std::int64_t> want;
    std::int64_t d = 0;
    for (std::size_t node = 0; node < sizes.size(); ++node) {
      for (std::int64_t i = 0; i < sizes[node]; ++i, ++d) {
        bool here = false;
        for (const auto& p : present) here = here || (node < hosts.size() && hosts[node] == p);
        if (!here) want.insert(d);
      }
    }
    EXPECT_EQ(devices_of_missing_hosts(c, hosts, present), want) << "trial " << trial;
  }
}

TEST(LostDevices, RandomFilesParseToTheUnionOfTheirWordsAndRangesPrintMaximal) {
  std::mt19937 rng(2027);
  const ClusterSpec c = nodes_of({8, 8, 8, 8});  // ids 0..31
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    std::set<std::int64_t> want;
    const int lines = static_cast<int>(rng() % 5);
    for (int l = 0; l < lines; ++l) {
      const int words = static_cast<int>(rng() % 4);
      for (int w = 0; w < words; ++w) {
        const std::int64_t a = rng() % 32, len = rng() % 4;
        const std::int64_t b = std::min<std::int64_t>(31, a + len);
        text += len == 0 ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b);
        text += rng() % 2 ? ", " : " ";
        for (std::int64_t x = a; x <= (len == 0 ? a : b); ++x) want.insert(x);
      }
      // A comment may name ids: they do not count.
      if (rng() % 2) text += "# not 5, 6-7";
      text += "\n";
    }
    ASSERT_EQ(parse_lost_devices(text, "l.txt", c), want) << text;
    // device_ranges: ascending pieces "a" or "a-b" (b > a), no two touching, one per maximal
    // run of consecutive ids, and it reads back as the same set.
    const std::string printed = device_ranges(want);
    std::size_t runs = 0;
    for (std::int64_t x : want) runs += want.count(x - 1) ? 0 : 1;
    std::size_t pieces = printed.empty() ? 0 : 1;
    for (char ch : printed) pieces += ch == ',' ? 1 : 0;
    EXPECT_EQ(pieces, runs) << printed;
    EXPECT_EQ(parse_lost_devices(printed, "l.txt", c), want) << printed;
    // Appending one id keeps the text and adds exactly that id.
    const std::int64_t extra = rng() % 32;
    std::set<std::int64_t> more = want;
    more.insert(extra);
    EXPECT_EQ(parse_lost_devices(add_lost_device(text, extra, "why"), "l.txt", c), more);
  }
}

}  // namespace
}  // namespace eth::lost_devices_test
