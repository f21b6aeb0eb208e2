// The CUDA runtime of a build without the backend (ETH_CUDA=OFF): no devices, and every call
// that needs one throws CudaError saying the build has no CUDA. The kernels of kernels.h are
// not defined here: only code compiled with ETH_CUDA calls them (tests/kernels/CMakeLists.txt).
#include "kernels/cuda/runtime.h"

namespace eth::cuda {
namespace {

[[noreturn]] void no_cuda() {
  throw CudaError("[cuda] this build has no CUDA (configured with -DETH_CUDA=OFF, or nvcc was "
                  "not found): rebuild with the CUDA toolkit for --device cuda");
}

}  // namespace

bool compiled() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() {
  return "this build has no CUDA (configured with -DETH_CUDA=OFF, or nvcc was not found)";
}
DeviceInfo device_info() { no_cuda(); }
void set_device(int /*device*/) { no_cuda(); }
void* alloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  no_cuda();
}
void free(void* /*p*/) noexcept {}
void copy_to_device(void*, const void*, std::size_t) { no_cuda(); }
void copy_to_host(void*, const void*, std::size_t) { no_cuda(); }
void copy_on_device(void*, const void*, std::size_t) { no_cuda(); }
void memset_zero(void*, std::size_t) { no_cuda(); }
void synchronize() { no_cuda(); }

}  // namespace eth::cuda
