// FlashAttnFp8Op: the module of flash_attn_fp8.cu, the tensor maps of Q, K and V^T (e4m3, 128-byte swizzle)
// and the launches of the V^T pre-pass and the forward.
#include "kernels/attention/flash_attn_fp8_op.hpp"

#include "kernels/attention/flash_attn_fp8_params.cuh"
#include "kernels/attention/flash_attn_wgmma_op.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/tensor_map.hpp"

namespace lab {
namespace {

constexpr int kHeadDim = 128;
constexpr int kBlockM = 128;  // query rows per CTA (two consumer warpgroups)
constexpr int kBlockN = 128;  // keys per tile: a V^T row of the tile is one 128-byte swizzled row
constexpr int kStages = 3;
constexpr int kTransposeThreads = 256;  // a thread moves 16 keys x 16 dimensions

// Shared memory of flash_attn_fp8_fwd<kBlockN, kStages>: Q, the K and V^T rings, 1 + 4 STAGES mbarriers, and
// the slack to align the start to 1024 bytes.
constexpr size_t kForwardShared =
    size_t(kBlockM) * kHeadDim + 2 * kStages * size_t(kBlockN) * kHeadDim + (1 + 4 * kStages) * 8 + 1024;

// A 3-D e4m3 view [outer, rows, inner] with boxes of box_inner x box_rows x 1 in the 128-byte swizzle.
TensorMap e4m3_map(Backend& backend, const uint8_t* base, int outer, int rows, int inner, int box_inner,
                   int box_rows) {
  const DeviceBuffer view = DeviceBuffer::borrow(const_cast<uint8_t*>(base), size_t(outer) * rows * inner);
  TensorMapDesc d = dense_tensor_map(TensorElement::U8, view, {uint64_t(inner), uint64_t(rows), uint64_t(outer)},
                                     {uint32_t(box_inner), uint32_t(box_rows), 1});
  d.swizzle = TensorSwizzle::B128;
  d.l2_promotion = TensorL2Promotion::B256;
  return backend.tensor_map(d);
}

}  // namespace

CompileRequest fa_fp8_compile_request(int exp2_fma) {
  if (const std::string problem = fa_wgmma_exp2_fma_problem(exp2_fma); !problem.empty())
    throw UsageError("flash attention fp8: " + problem);
  CompileRequest request{kFlashAttnFp8Source,
                         {},
                         {"flash_attn_fp8_vt", "flash_attn_fp8_fwd<" + std::to_string(kBlockN) + ", " +
                                                   std::to_string(kStages) + ", " + std::to_string(exp2_fma) + ">"}};
  request.arch_specific = true;
  return request;
}

FlashAttnFp8Op::FlashAttnFp8Op(Backend& backend, int exp2_fma) : backend_(backend) {
  const CompileRequest request = fa_fp8_compile_request(exp2_fma);
  module_ = backend.compile(request);
  vt_ = module_->kernel(request.name_expressions[0]);
  fwd_ = module_->kernel(request.name_expressions[1]);
}

void FlashAttnFp8Op::transpose_v(const uint8_t* v, uint8_t* vt, int batch_heads, int n_k) const {
  const FlashAttnFp8VtParams params{v, vt, n_k, fp8_padded_keys(n_k)};
  const int threads_per_head = params.n_k_padded / 16 * (kHeadDim / 16);
  const LaunchConfig cfg{{unsigned((threads_per_head + kTransposeThreads - 1) / kTransposeThreads),
                          unsigned(batch_heads), 1},
                         {kTransposeThreads, 1, 1},
                         0};
  backend_.launch(vt_, cfg, kernel_params(params));
}

void FlashAttnFp8Op::forward(const uint8_t* q, const uint8_t* k, const uint8_t* vt, uint16_t* o, float* lse,
                             const AttentionProblem& p, const Fp8Scales& scales) const {
  const int bh = p.batch_heads;
  const FlashAttnFp8FwdParams params{e4m3_map(backend_, q, bh, p.n_q, kHeadDim, kHeadDim, kBlockM),
                                     e4m3_map(backend_, k, bh, p.n_k, kHeadDim, kHeadDim, kBlockN),
                                     e4m3_map(backend_, vt, bh, kHeadDim, fp8_padded_keys(p.n_k), kBlockN, kHeadDim),
                                     o,
                                     lse,
                                     p.n_q,
                                     p.n_k,
                                     p.scale * scales.q * scales.k,
                                     scales.v};
  const LaunchConfig cfg{{unsigned((p.n_q + kBlockM - 1) / kBlockM), unsigned(bh), 1}, {384, 1, 1}, kForwardShared};
  backend_.launch(fwd_, cfg, kernel_params(params));
}

}  // namespace lab
