// Device buffers over a host communicator, through explicit host copies. See staged_comm.h.
#include "comm/staged_comm.h"

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "core/error.h"

namespace eth {

namespace {

// The host operation on the staging copy; once it completes, `finish` (the upload, if any)
// runs exactly once, on whichever thread observes the completion first.
class StagedRequest final : public RequestImpl {
 public:
  StagedRequest(Request inner, std::vector<std::byte> staging,
                std::function<void(const std::vector<std::byte>&)> finish)
      : inner_(std::move(inner)), staging_(std::move(staging)), finish_(std::move(finish)) {}
  bool test() override {
    if (!done_ && inner_.test()) complete();
    return done_;
  }
  void wait() override {
    if (done_) return;
    inner_.wait();
    complete();
  }
  bool wait_for(std::chrono::microseconds slice, std::chrono::microseconds waited) override {
    if (!done_ && inner_.wait_for(slice, waited)) complete();
    return done_;
  }
  // The staging copy's address: the host operation was posted on it.
  std::byte* data() { return staging_.data(); }

 private:
  void complete() {
    done_ = true;
    if (finish_) finish_(staging_);
  }
  Request inner_;
  std::vector<std::byte> staging_;
  std::function<void(const std::vector<std::byte>&)> finish_;
  bool done_ = false;
};

class StagedImpl final : public CommImpl {
 public:
  StagedImpl(Communicator host, const DeviceMemoryOps& device)
      : host_(std::move(host)), device_(device) {}

  std::string_view backend() const override { return host_.backend(); }
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  const std::vector<int>& world_ranks() const override { return host_.world_ranks(); }
  const CommOptions& options() const override { return host_.options(); }

  std::shared_ptr<CommImpl> split(int color, int key) override {
    const Communicator c = host_.split(color, key);
    if (c.is_null()) return nullptr;
    return std::make_shared<StagedImpl>(c, device_);
  }
  std::shared_ptr<CommImpl> create_group(const std::vector<int>& ranks) override {
    return std::make_shared<StagedImpl>(host_.create_group(ranks), device_);
  }

  Request isend(std::span<const std::byte> data, int dest, int tag) override {
    std::vector<std::byte> staging = download(data.data(), data.size());
    const std::span<const std::byte> host(staging.data(), staging.size());
    Request inner = host_.isend_bytes(host, dest, tag);  // the vector's buffer moves intact
    return Request(std::make_shared<StagedRequest>(std::move(inner), std::move(staging), nullptr));
  }
  Request irecv(std::span<std::byte> data, int src, int tag) override {
    std::vector<std::byte> staging(data.size());
    const std::span<std::byte> host(staging.data(), staging.size());
    Request inner = host_.irecv_bytes(host, src, tag);
    return Request(std::make_shared<StagedRequest>(std::move(inner), std::move(staging),
                                                   uploader(data.data())));
  }
  Request iallreduce(void* data, std::size_t count, DType type, ReduceOp op,
                     std::string /*what*/) override {
    std::vector<std::byte> staging = download(data, count * dtype_size(type));
    Request inner = post_host_allreduce(staging.data(), count, type, op);
    return Request(std::make_shared<StagedRequest>(std::move(inner), std::move(staging),
                                                   uploader(data)));
  }
  Request ibroadcast(std::span<std::byte> data, int root, std::string /*what*/) override {
    std::vector<std::byte> staging = download(data.data(), data.size());
    host_.broadcast_bytes(std::span<std::byte>(staging.data(), staging.size()), root);
    return Request(std::make_shared<StagedRequest>(Request(), std::move(staging),
                                                   uploader(data.data())));
  }
  Request ibarrier() override {
    host_.barrier();
    return Request();
  }
  Request igather(const void* in, void* out, std::size_t count, DType type) override {
    // Host memory, as on every communicator: one blocking host gather.
    ETH_CHECK(type == DType::F64 || type == DType::I64, "staged gather of an unsupported type");
    if (type == DType::F64) {
      const std::span<const double> mine(static_cast<const double*>(in), count);
      const std::vector<double> all = host_.gather(mine);
      if (out != nullptr) std::memcpy(out, all.data(), all.size() * sizeof(double));
    } else {
      const std::span<const std::int64_t> mine(static_cast<const std::int64_t*>(in), count);
      const std::vector<std::int64_t> all = host_.gather(mine);
      if (out != nullptr) std::memcpy(out, all.data(), all.size() * sizeof(std::int64_t));
    }
    return Request();
  }

 private:
  std::vector<std::byte> download(const void* device, std::size_t bytes) const {
    std::vector<std::byte> host(bytes);
    if (bytes > 0) device_.download(host.data(), device, bytes);
    return host;
  }
  std::function<void(const std::vector<std::byte>&)> uploader(void* device) const {
    const DeviceMemoryOps* ops = &device_;
    return [ops, device](const std::vector<std::byte>& host) {
      if (!host.empty()) ops->upload(device, host.data(), host.size());
    };
  }
  // The host communicator's non-blocking all-reduce on the staging copy (its own pieces).
  Request post_host_allreduce(std::byte* host, std::size_t count, DType type, ReduceOp op) {
    if (type == DType::F32) {
      const std::span<float> d(reinterpret_cast<float*>(host), count);
      if (op == ReduceOp::Sum) return host_.iallreduce_sum(d);
      host_.allreduce_max(d);
      return Request();
    }
    ETH_CHECK(type == DType::F64, "staged all-reduce of an unsupported type");
    const std::span<double> d(reinterpret_cast<double*>(host), count);
    if (op == ReduceOp::Sum) return host_.iallreduce_sum(d);
    host_.allreduce_max(d);
    return Request();
  }

  Communicator host_;
  const DeviceMemoryOps& device_;
};

}  // namespace

Communicator make_host_staged_communicator(const Communicator& host,
                                           const DeviceMemoryOps& device) {
  ETH_CHECK(!host.is_null(), "a staged communicator needs a host communicator");
  ETH_CHECK(device.download != nullptr && device.upload != nullptr,
            "a staged communicator needs the device's download and upload");
  return Communicator(std::make_shared<StagedImpl>(host, device));
}

}  // namespace eth
