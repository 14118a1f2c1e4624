// The launch plan of one input shape (batch, height, width): every activation
// placed in one arena, every launch recorded as a step tagged with its layer,
// the batch-dependent ops (PSA attention per block, top-k; the decode and its
// anchor grid belong to the network's ops, per image size), and the
// named tensors the network exposes. Built by walking the model description;
// replayed as a CUDA graph on `cuda`.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/psa_half_op.hpp"
#include "kernels/attention/psa_op.hpp"
#include "kernels/detect/topk_postprocess.hpp"
#include "pipeline/executor/activation.hpp"
#include "pipeline/executor/network_ops.hpp"
#include "pipeline/executor/nhwc_activation.hpp"

namespace lab {

struct PlanStep {
  std::string layer;  // "layer00".."layer23", "decode", "topk"
  std::function<void()> run;
};

// One PSA attention block's op and workspace (the workspace keeps Q, K and the
// logsumexp for the maps).
struct AttentionRun {
  std::string name;  // "model.10.m.0.attn"
  std::unique_ptr<PsaOp> op;
  PsaWorkspace workspace;
};

// One PSA attention block of the NHWC network: its op (PsaHalfOp, or PsaTf32NhwcOp on float activations),
// where its qkv lies and the logsumexp it writes (for the maps, rebuilt on the host).
struct NhwcAttentionRun {
  std::string name;  // "model.10.m.0.attn"
  std::unique_ptr<PsaNhwcForward> op;
  NhwcActivation qkv;
  float* lse = nullptr;  // [B * heads, N]
};

struct ShapePlan {
  int batch = 0, height = 0, width = 0;
  Arena arena;
  std::vector<PlanStep> steps;
  std::map<std::string, Activation> tensors;  // "input", "layer00".., "head.boxes", "head.scores"
  float* detections = nullptr;                // [batch, max_det, 6]
  size_t splitk_floats = 0;                   // the largest split-K workspace of any conv
  float* splitk_workspace = nullptr;          // one splitk_floats region per lane
  // The NHWC network's split-K arrival counters (conv2d_nhwc): the most any conv needs, one region per lane,
  // zeroed once; each launch leaves them zero.
  size_t splitk_arrivals = 0;
  DeviceBuffer splitk_counters;
  int max_det = 0;
  std::vector<std::unique_ptr<AttentionRun>> attentions;
  // The 16-bit NHWC network (nhwc_plan.hpp): its layers ("layer00".."layer22"; "input" and the head's float
  // planes stay in `tensors`), their element type, and its attention blocks.
  std::map<std::string, NhwcActivation> nhwc_tensors;
  ActivationType nhwc_type = ActivationType::f16;
  std::vector<std::unique_ptr<NhwcAttentionRun>> nhwc_attentions;
  std::unique_ptr<TopkPostprocessOp> topk;
  std::unique_ptr<LaunchGraph> graph;
};

// The modules a plan of this shape compiles beyond the network's ops (its PSA attention ops'), for
// Backend::precompile.
std::vector<CompileRequest> plan_compile_requests(const Yolo26Model& model, int batch, int height, int width);

// Builds the plan (a measuring pass sizes the arena, then the real pass
// allocates and records).
std::unique_ptr<ShapePlan> build_shape_plan(NetworkOps& ops, const Yolo26Model& model, int batch, int height,
                                            int width);

}  // namespace lab
