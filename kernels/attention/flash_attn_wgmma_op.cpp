// FlashAttnWgmmaOp: the tile configuration per HEAD_DIM, the tensor maps of Q, K and V, and the launch of
// flash_attn_wgmma_fwd.
#include "kernels/attention/flash_attn_wgmma_op.hpp"

#include "kernels/attention/flash_attn_wgmma_params.cuh"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/tensor_map.hpp"

namespace lab {
namespace {

constexpr int kBlockM = 128;  // query rows per CTA (two consumer warpgroups)
constexpr int kColumns = 64;  // elements per 128-byte swizzled row: the maps' inner box

// Keys per tile and pipeline depth: the largest tiles whose Q block and STAGES K and V tiles fit in the 227 KB
// a CTA may have, with the score accumulators (BN / 2 floats a thread) beside the output (HEAD_DIM / 2).
struct WgmmaTiles {
  int bn, stages;
};
WgmmaTiles tiles_for(int head_dim) {
  if (const std::string problem = fa_wgmma_head_dim_problem(head_dim); !problem.empty())
    throw UsageError("flash attention " + problem);
  if (head_dim == 64) return {128, 3};
  if (head_dim == 128) return {128, 2};
  return {64, 2};
}

size_t shared_bytes(int head_dim, const WgmmaTiles& t) {
  const size_t q = size_t(kBlockM) * head_dim * 2, tile = size_t(t.bn) * head_dim * 2;
  return q + 2 * t.stages * tile + (1 + 3 * t.stages) * 8 + 1024;  // + alignment slack (the kernel's Smem)
}

}  // namespace

TensorMap fa_wgmma_head_map(Backend& backend, HalfType type, const uint16_t* base, int bh, int rows,
                            int head_dim, int box_rows) {
  const DeviceBuffer view = DeviceBuffer::borrow(const_cast<uint16_t*>(base), size_t(bh) * rows * head_dim * 2);
  TensorMapDesc d = dense_tensor_map(type == HalfType::f16 ? TensorElement::F16 : TensorElement::BF16, view,
                                     {uint64_t(head_dim), uint64_t(rows), uint64_t(bh)},
                                     {uint32_t(kColumns), uint32_t(box_rows), 1});
  d.swizzle = TensorSwizzle::B128;
  d.l2_promotion = TensorL2Promotion::B256;
  return backend.tensor_map(d);
}

std::string fa_wgmma_head_dim_problem(int head_dim) {
  if (head_dim == 64 || head_dim == 128 || head_dim == 256) return "";
  return "wgmma: HEAD_DIM 64, 128 or 256 (rows of whole 128-byte swizzled column blocks), not " +
         std::to_string(head_dim);
}

CompileRequest fa_wgmma_compile_request(HalfType type, int head_dim) {
  const WgmmaTiles t = tiles_for(head_dim);
  CompileRequest r{kFlashAttnWgmmaSource,
                   {},
                   {"flash_attn_wgmma_fwd<" + half_type_template_arg(type) + ", " + std::to_string(head_dim) +
                    ", " + std::to_string(t.bn) + ", " + std::to_string(t.stages) + ">"}};
  r.arch_specific = true;
  return r;
}

FlashAttnWgmmaOp::FlashAttnWgmmaOp(Backend& backend, HalfType type, int head_dim)
    : backend_(backend), type_(type), head_dim_(head_dim) {
  const CompileRequest request = fa_wgmma_compile_request(type, head_dim);
  module_ = backend.compile(request);
  fwd_ = module_->kernel(request.name_expressions[0]);
}

void FlashAttnWgmmaOp::forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o,
                               float* lse, const AttentionProblem& p) const {
  const WgmmaTiles t = tiles_for(head_dim_);
  const FlashAttnWgmmaFwdParams params{
      fa_wgmma_head_map(backend_, type_, q, p.batch_heads, p.n_q, head_dim_, kBlockM),
      fa_wgmma_head_map(backend_, type_, k, p.batch_heads, p.n_k, head_dim_, t.bn),
      fa_wgmma_head_map(backend_, type_, v, p.batch_heads, p.n_k, head_dim_, t.bn),
      o, lse, p.n_q, p.n_k, p.scale};
  const LaunchConfig cfg{{unsigned((p.n_q + kBlockM - 1) / kBlockM), unsigned(p.batch_heads), 1},
                         {384, 1, 1},
                         shared_bytes(head_dim_, t)};
  backend_.launch(fwd_, cfg, kernel_params(params));
}

}  // namespace lab
