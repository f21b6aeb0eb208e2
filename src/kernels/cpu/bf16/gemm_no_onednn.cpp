// Stub of the oneDNN half of gemm_detail.h for ETH_GEMM=openblas builds: no oneDNN, so no bf16
// matmul primitive; gemm_path_available(OneDnn) is false and every bf16 GEMM computes in fp32.
#include "core/error.h"
#include "kernels/cpu/bf16/gemm_detail.h"

namespace eth::cpu::bf16::detail {

bool onednn_bf16_available() { return false; }

void onednn_bf16_gemm(const GemmCall&) {
  ETH_CHECK(false, "bf16 GEMM: this build has no oneDNN (ETH_GEMM=openblas)");
}

}  // namespace eth::cpu::bf16::detail
