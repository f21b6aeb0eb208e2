// The two kernel sets the stage computation is instantiated with: the fast fp32 CPU kernels
// (training) and the naive reference kernels in double (the whole-model finite-difference test).
// Each is a struct of function pointers with one `Real`; the stage code calls K::name(...), so
// both paths run the very same forward/backward/recompute sequence. Not a dispatch layer.
#pragma once

#include "kernels/cpu/attention.h"
#include "kernels/cpu/crossentropy.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/vocab_parallel.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/crossentropy.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/layernorm.h"
#include "kernels/reference/matmul.h"
#include "kernels/reference/pointwise.h"
#include "kernels/reference/vocab_parallel.h"

namespace eth {

struct CpuKernels {
  using Real = float;
  static constexpr auto encoder_forward = &cpu::encoder_forward;
  static constexpr auto encoder_backward = &cpu::encoder_backward;
  static constexpr auto layernorm_forward = &cpu::layernorm_forward;
  static constexpr auto layernorm_backward = &cpu::layernorm_backward;
  static constexpr auto matmul_nt_forward = &cpu::matmul_nt_forward;
  static constexpr auto matmul_nt_backward = &cpu::matmul_nt_backward;
  static constexpr auto matmul_nn_forward = &cpu::matmul_nn_forward;
  static constexpr auto matmul_nn_backward = &cpu::matmul_nn_backward;
  static constexpr auto attention_scores_forward = &cpu::attention_scores_forward;
  static constexpr auto attention_scores_backward = &cpu::attention_scores_backward;
  static constexpr auto attention_softmax_forward = &cpu::attention_softmax_forward;
  static constexpr auto attention_softmax_backward = &cpu::attention_softmax_backward;
  static constexpr auto attention_av_forward = &cpu::attention_av_forward;
  static constexpr auto attention_av_backward = &cpu::attention_av_backward;
  static constexpr auto gelu_forward = &cpu::gelu_forward;
  static constexpr auto gelu_backward = &cpu::gelu_backward;
  static constexpr auto residual_forward = &cpu::residual_forward;
  static constexpr auto residual_backward = &cpu::residual_backward;
  static constexpr auto dropout_forward = &cpu::dropout_forward;
  static constexpr auto dropout_backward = &cpu::dropout_backward;
  static constexpr auto crossentropy_forward = &cpu::crossentropy_forward;
  static constexpr auto crossentropy_backward = &cpu::crossentropy_backward;
  // Vocabulary-parallel embedding and loss (tp > 1 stages).
  static constexpr auto vocab_embedding_forward = &cpu::vocab_embedding_forward;
  static constexpr auto vocab_embedding_backward = &cpu::vocab_embedding_backward;
  static constexpr auto position_forward = &cpu::position_forward;
  static constexpr auto position_backward = &cpu::position_backward;
  static constexpr auto vocab_ce_max = &cpu::vocab_ce_max;
  static constexpr auto vocab_ce_sums = &cpu::vocab_ce_sums;
  static constexpr auto vocab_ce_finish = &cpu::vocab_ce_finish;
  static constexpr auto vocab_ce_backward = &cpu::vocab_ce_backward;
};

template <typename R>
struct RefKernels {
  using Real = R;
  static constexpr auto encoder_forward = &ref::encoder_forward<R>;
  static constexpr auto encoder_backward = &ref::encoder_backward<R>;
  static constexpr auto layernorm_forward = &ref::layernorm_forward<R>;
  static constexpr auto layernorm_backward = &ref::layernorm_backward<R>;
  static constexpr auto matmul_nt_forward = &ref::matmul_nt_forward<R>;
  static constexpr auto matmul_nt_backward = &ref::matmul_nt_backward<R>;
  static constexpr auto matmul_nn_forward = &ref::matmul_nn_forward<R>;
  static constexpr auto matmul_nn_backward = &ref::matmul_nn_backward<R>;
  static constexpr auto attention_scores_forward = &ref::attention_scores_forward<R>;
  static constexpr auto attention_scores_backward = &ref::attention_scores_backward<R>;
  static constexpr auto attention_softmax_forward = &ref::attention_softmax_forward<R>;
  static constexpr auto attention_softmax_backward = &ref::attention_softmax_backward<R>;
  static constexpr auto attention_av_forward = &ref::attention_av_forward<R>;
  static constexpr auto attention_av_backward = &ref::attention_av_backward<R>;
  static constexpr auto gelu_forward = &ref::gelu_forward<R>;
  static constexpr auto gelu_backward = &ref::gelu_backward<R>;
  static constexpr auto residual_forward = &ref::residual_forward<R>;
  static constexpr auto residual_backward = &ref::residual_backward<R>;
  static constexpr auto dropout_forward = &ref::dropout_forward<R>;
  static constexpr auto dropout_backward = &ref::dropout_backward<R>;
  static constexpr auto crossentropy_forward = &ref::crossentropy_forward<R>;
  static constexpr auto crossentropy_backward = &ref::crossentropy_backward<R>;
  static constexpr auto vocab_embedding_forward = &ref::vocab_embedding_forward<R>;
  static constexpr auto vocab_embedding_backward = &ref::vocab_embedding_backward<R>;
  static constexpr auto position_forward = &ref::position_forward<R>;
  static constexpr auto position_backward = &ref::position_backward<R>;
  static constexpr auto vocab_ce_max = &ref::vocab_ce_max<R>;
  static constexpr auto vocab_ce_sums = &ref::vocab_ce_sums<R>;
  static constexpr auto vocab_ce_finish = &ref::vocab_ce_finish<R>;
  static constexpr auto vocab_ce_backward = &ref::vocab_ce_backward<R>;
};

}  // namespace eth
