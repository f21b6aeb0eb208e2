// The NCCL communicator (comm/nccl/nccl_comm.h). Without a GPU, or in a build without NCCL, creating
// one is a CommError that says why, before any collective. On a GPU (scripts/gpu-check.sh): one
// rank on one GPU (NCCL allows one rank per GPU, and the check machine has one), bootstrapped
// over a LocalWorld: the collectives keep or combine device buffers as the contract says, and
// gather and split work. The multi-rank behaviour needs several GPUs: not run (docs/gpu.md).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/local/local_comm.h"
#include "comm/nccl/nccl_comm.h"
#include "kernels/cuda/runtime.h"

namespace eth {
namespace {

bool have_gpu_and_nccl() { return nccl_compiled() && cuda::device_count() > 0; }

TEST(NcclComm, WithoutAGpuOrNcclItIsACommErrorSayingWhy) {
  if (have_gpu_and_nccl()) GTEST_SKIP() << "this machine has a GPU and NCCL";
  LocalWorld world(1);
  try {
    (void)make_nccl_communicator(world.comm(0), 0);
    FAIL() << "expected CommError";
  } catch (const CommError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find(nccl_compiled() ? "no GPU" : "built without NCCL") != std::string::npos)
        << what;
  }
}

TEST(NcclComm, OneRankCollectivesOnTheGpu) {
  if (!have_gpu_and_nccl()) {
    GTEST_SKIP() << (nccl_compiled() ? "no GPU here: " + cuda::unavailable_reason()
                                     : std::string("built without NCCL"));
  }
  LocalWorld world(1);
  const Communicator c = make_nccl_communicator(world.comm(0), 0);
  EXPECT_EQ(c.backend(), "nccl");
  EXPECT_EQ(c.size(), 1);
  const std::vector<float> host = {1.5f, -2.0f, 3.0f, 0.25f};
  cuda::DeviceBuffer<float> d(host.size());
  cuda::copy_to_device(d.data(), host.data(), d.bytes());
  const std::span<float> dev(d.data(), d.size());  // device memory, as the backend expects
  c.allreduce_sum(dev);                             // one rank: the sum is the value
  c.allreduce_max(dev);
  c.broadcast(dev, 0);
  c.barrier();
  Request r = c.iallreduce_sum(dev);
  r.wait();
  std::vector<float> back(host.size());
  cuda::copy_to_host(back.data(), d.data(), d.bytes());
  EXPECT_EQ(back, host);
  const std::vector<double> values = {4.0, 5.0};
  EXPECT_EQ(c.gather(std::span<const double>(values)), values);  // host values, rank 0
  const Communicator sub = c.split(0, 0);
  ASSERT_FALSE(sub.is_null());
  EXPECT_EQ(sub.size(), 1);
  sub.allreduce_sum(dev);
  cuda::copy_to_host(back.data(), d.data(), d.bytes());
  EXPECT_EQ(back, host);
}

}  // namespace
}  // namespace eth
