// A one-rank fake backend for tests of Communicator's backend-independent half: everything but
// the collectives a test records is a no-op. A test derives from it and overrides iallreduce
// (and ibroadcast) to see the pieces it is handed.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"

namespace eth::test {

class OneRankImpl : public CommImpl {
 public:
  OneRankImpl(std::string_view name, CommOptions options) : name_(name), options_(options) {}
  std::string_view backend() const override { return name_; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::vector<int>& world_ranks() const override { return world_; }
  const CommOptions& options() const override { return options_; }
  std::shared_ptr<CommImpl> split(int, int) override { return nullptr; }
  std::shared_ptr<CommImpl> create_group(const std::vector<int>&) override { return nullptr; }
  Request isend(std::span<const std::byte>, int, int) override { return {}; }
  Request irecv(std::span<std::byte>, int, int) override { return {}; }
  Request ibroadcast(std::span<std::byte>, int, std::string) override { return {}; }
  Request ibarrier() override { return {}; }
  Request igather(const void*, void*, std::size_t, DType) override { return {}; }

 private:
  std::string name_;
  CommOptions options_;
  std::vector<int> world_{0};
};

}  // namespace eth::test
