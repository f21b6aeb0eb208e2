// The CUDA runtime of a build without the backend (ETH_CUDA=OFF): no devices, and every call
// that needs one throws CudaError saying the build has no CUDA. The kernels of kernels.h are
// defined too, each throwing the same: StageCompute<GpuKernels<CudaApi>> (train/
// stage_compute_gpu.cpp) is compiled and linked in every build, and the CLI refuses
// --device cuda before any of it runs.
#include "kernels/cuda/kernels.h"
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

// ---- kernels.h, in its order ----
using I = std::int64_t;
using i32 = std::int32_t;
void encoder_forward(Bf16*, const i32*, const Bf16*, const Bf16*, I, I, I, I) { no_cuda(); }
void encoder_backward(float*, float*, const Bf16*, const i32*, I, I, I, I) { no_cuda(); }
void vocab_embedding_forward(float*, const i32*, const Bf16*, I, I, I, I, I) { no_cuda(); }
void vocab_embedding_backward(float*, const Bf16*, const i32*, I, I, I, I) { no_cuda(); }
void position_forward(Bf16*, const float*, const Bf16*, I, I, I) { no_cuda(); }
void position_backward(float*, const Bf16*, I, I, I) { no_cuda(); }
void layernorm_forward(Bf16*, float*, float*, const Bf16*, const Bf16*, const Bf16*, I, I) {
  no_cuda();
}
void layernorm_backward(Bf16*, float*, float*, const Bf16*, const Bf16*, const Bf16*, const float*,
                        const float*, I, I) {
  no_cuda();
}
void rmsnorm_forward(Bf16*, float*, const Bf16*, const Bf16*, float, I, I) { no_cuda(); }
void rmsnorm_backward(Bf16*, float*, const Bf16*, const Bf16*, const Bf16*, const float*, I, I) {
  no_cuda();
}
void rope_forward(Bf16*, I, I, I, I, I, float) { no_cuda(); }
void rope_backward(Bf16*, I, I, I, I, I, float) { no_cuda(); }
void swiglu_forward(Bf16*, const Bf16*, const Bf16*, I, I) { no_cuda(); }
void swiglu_backward(Bf16*, Bf16*, const Bf16*, const Bf16*, const Bf16*, I, I) { no_cuda(); }
void matmul_nt_forward(Bf16*, const Bf16*, const Bf16*, const Bf16*, I, I, I) { no_cuda(); }
void matmul_nt_backward(Bf16*, float*, float*, const Bf16*, const Bf16*, const Bf16*, I, I, I) {
  no_cuda();
}
void matmul_nn_forward(Bf16*, const Bf16*, const Bf16*, const Bf16*, I, I, I) { no_cuda(); }
void matmul_nn_backward(Bf16*, float*, float*, const Bf16*, const Bf16*, const Bf16*, I, I, I) {
  no_cuda();
}
void matmul_nn_forward_partial(float*, const Bf16*, const Bf16*, const Bf16*, I, I, I) {
  no_cuda();
}
void matmul_nt_backward_partial(float*, float*, float*, const Bf16*, const Bf16*, const Bf16*, I, I,
                                I) {
  no_cuda();
}
void matmul_nt_backward_rows(Bf16*, const GradRows<float>*, I, const Bf16*, const Bf16*,
                             const Bf16*, I, I, I) {
  no_cuda();
}
void matmul_nn_backward_rows(Bf16*, const GradRows<float>*, I, float*, const Bf16*, const Bf16*,
                             const Bf16*, I, I, I) {
  no_cuda();
}
void matmul_nt_backward_partial_rows(float*, const GradRows<float>*, I, const Bf16*, const Bf16*,
                                     const Bf16*, I, I, I) {
  no_cuda();
}
void attention_forward(Bf16*, float*, const Bf16*, const AttnDropout&, I, I, I, I, I) {
  no_cuda();
}
void attention_backward(Bf16*, float*, const Bf16*, const float*, const Bf16*, const AttnDropout&,
                        I, I, I, I, I) {
  no_cuda();
}
void gelu_forward(Bf16*, const Bf16*, I) { no_cuda(); }
void gelu_backward(Bf16*, const Bf16*, const Bf16*, I) { no_cuda(); }
void residual_forward(Bf16*, const Bf16*, const Bf16*, I) { no_cuda(); }
void residual_backward(Bf16*, Bf16*, const Bf16*, I) { no_cuda(); }
void dropout_forward(Bf16*, const Bf16*, const std::uint8_t*, float, I) { no_cuda(); }
void dropout_backward(Bf16*, const Bf16*, const std::uint8_t*, float, I) { no_cuda(); }
void dropout_mask_fill(std::uint8_t*, const RngStream&, float, I, I, I, I) { no_cuda(); }
void convert_to_bf16(Bf16*, const float*, I) { no_cuda(); }
void add_inplace(float*, const float*, I) { no_cuda(); }
void add_inplace(double*, const double*, I) { no_cuda(); }
void max_inplace(float*, const float*, I) { no_cuda(); }
void max_inplace(double*, const double*, I) { no_cuda(); }
void crossentropy_forward(double*, float*, float*, const Bf16*, const i32*, double, I, I) {
  no_cuda();
}
void crossentropy_forward_add(double*, float*, float*, const Bf16*, const i32*, double, I, I) {
  no_cuda();
}
void crossentropy_backward(Bf16*, const Bf16*, const float*, const i32*, double, I, I) {
  no_cuda();
}
void vocab_ce_max(float*, const Bf16*, I, I) { no_cuda(); }
void vocab_ce_sums(float*, const Bf16*, const float*, const i32*, I, I, I) { no_cuda(); }
void vocab_ce_finish(double*, float*, float*, const float*, const float*, double, I) { no_cuda(); }
void vocab_ce_finish_add(double*, float*, float*, const float*, const float*, double, I) {
  no_cuda();
}
void vocab_ce_backward(Bf16*, const Bf16*, const float*, const i32*, I, double, I, I) { no_cuda(); }
void adamw_update(float*, Bf16*, float*, float*, const float*, I, const cpu::AdamWScalars&) {
  no_cuda();
}
double sum_squares(const float*, I) { no_cuda(); }

}  // namespace eth::cuda
