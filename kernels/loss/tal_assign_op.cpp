// The tal_assign spec, the device forms of the assignment's inputs, and TalAssignOp's six launches.
#include "kernels/loss/tal_assign_op.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/loss/tal_assign_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

using K = ParamSpec::Kind;

// tal_score_sum's one CTA reads the B x A target scores alone: as many loads in flight as one SM holds (256
// threads: 62 us at batch 32, 640 on the H200).
constexpr int kScoreSumThreads = 1024;

CompileRequest tal_compile(const std::string&, const Params& p) {
  const std::string block_n = std::to_string(param_int(p, "BLOCK_N"));
  const std::string threads = std::to_string(param_int(p, "THREADS"));
  return {"loss/tal_assign.cu",
          {},
          {"tal_metrics<" + block_n + ">", "tal_topk<" + threads + ">", "tal_resolve<" + block_n + ">",
           "tal_gt_stats<" + threads + ">", "tal_targets<" + block_n + ">",
           "tal_score_sum<" + std::to_string(kScoreSumThreads) + ">"}};
}

void check_block(const char* name, int value) {
  if (value < 32 || value > 1024 || (value & (value - 1)) != 0)
    throw UsageError(std::string("TalAssignOp: ") + name + "=" + std::to_string(value) +
                     " is invalid: must be a power of two in [32, 1024]");
}

unsigned tiles(int n, int block) {
  return unsigned((n + block - 1) / block);
}

}  // namespace

std::vector<ParamSpec> assign_problem_params(const char* batch, const char* imgsz, const char* classes,
                                             const char* gts) {
  return {{"B", K::Int, batch, "images", 1, 256},
          {"IMGSZ", K::Int, imgsz, "square network input (multiple of 32)", 32, 1280, false, {}, 32},
          {"NC", K::Int, classes, "classes", 1, 1000},
          {"GTS", K::Int, gts, "most gts of an image (the images hold 0..GTS)", 0, 512},
          {"TOPK", K::Int, "10", "anchors each gt takes (o2m 10, o2o 7)", 1, kTalTopkMax},
          {"TOPK2", K::Int, "10", "anchors each gt keeps after conflicts (o2m 10, o2o 1)", 1, kTalTopkMax}};
}

void check_topk2_rule(const Params& p, const std::string& kernel) {
  if (param_int(p, "TOPK2") > param_int(p, "TOPK"))
    throw UsageError("parameter TOPK2=" + p.at("TOPK2") + " of " + kernel +
                     " is invalid: must be at most TOPK=" + p.at("TOPK"));
}

const KernelSpec& tal_assign_spec() {
  static const std::vector<ParamSpec> params = [] {
    std::vector<ParamSpec> all = assign_problem_params("4", "256", "80", "8");
    all.push_back({"BLOCK_N", K::Int, "256", "threads per CTA of the per-anchor steps", 32, 1024, true});
    all.push_back({"THREADS", K::Int, "256", "threads per CTA of the per-gt steps", 32, 1024, true});
    return all;
  }();
  static const KernelSpec spec{
      .name = "tal_assign",
      .family = "loss",
      .description =
          "task-aligned assignment of a batch (float64): boxes [B,4,A], logits [B,nc,A], gts -> "
          "gt of each anchor and its target score [B,A]",
      .source = "loss/tal_assign.cu",
      .variants = {{"v1",
                    "metrics per (anchor, gt); top-k per gt by block argmax rounds; integer-atomic claims"}},
      .params = params,
      .validate = [](const Params& p) { check_topk2_rule(p, "tal_assign"); },
      .compile = tal_compile};
  return spec;
}

DeviceAnchorGrid upload_anchor_grid(Backend& backend, const AnchorGrid& anchors) {
  return {backend.upload_vector(anchors.x), backend.upload_vector(anchors.y),
          backend.upload_vector(anchors.stride), static_cast<int>(anchors.size())};
}

int max_ground_truth_rows(const std::vector<std::vector<loss::GtBox>>& gts) {
  int rows = 1;
  for (const auto& image : gts) rows = std::max(rows, static_cast<int>(image.size()));
  return rows;
}

void upload_ground_truth_into(Backend& backend, const std::vector<std::vector<loss::GtBox>>& gts,
                              int min_rows, DeviceGroundTruth& out, HostBuffer* staging) {
  out.batch = static_cast<int>(gts.size());
  out.max_gts = std::max(max_ground_truth_rows(gts), min_rows);
  out.max_class = -1;
  std::vector<TalGt> rows(size_t(out.batch) * out.max_gts, TalGt{0, 0, 0, 0, 0, 0});
  std::vector<int> counts;
  for (int b = 0; b < out.batch; ++b) {
    counts.push_back(static_cast<int>(gts[b].size()));
    for (size_t g = 0; g < gts[b].size(); ++g) {
      const loss::GtBox& box = gts[b][g];
      rows[size_t(b) * out.max_gts + g] = {box.x1, box.y1, box.x2, box.y2, box.cls, 0};
      out.max_class = std::max(out.max_class, box.cls);
    }
  }
  const size_t row_bytes = rows.size() * sizeof(TalGt), count_bytes = counts.size() * sizeof(int);
  if (staging && staging->bytes() < row_bytes + count_bytes)
    *staging = backend.alloc_host(row_bytes + count_bytes);
  size_t staged = 0;
  const auto upload = [&](DeviceBuffer& buffer, const void* values, size_t bytes) {
    if (buffer.bytes() < bytes) buffer = backend.alloc(bytes);
    if (!staging) return backend.upload(buffer.get(), values, bytes);
    char* slot = staging->as<char>() + staged;
    std::memcpy(slot, values, bytes);
    staged += bytes;
    backend.upload_async(buffer.get(), slot, bytes);
  };
  upload(out.boxes, rows.data(), row_bytes);  // TalGt's 8-byte alignment first, the ints after
  upload(out.counts, counts.data(), count_bytes);
}

DeviceGroundTruth upload_ground_truth(Backend& backend, const std::vector<std::vector<loss::GtBox>>& gts,
                                      int min_rows) {
  DeviceGroundTruth out;
  upload_ground_truth_into(backend, gts, min_rows, out);
  return out;
}

TalAssignOp::TalAssignOp(Backend& backend, int block_n, int threads)
    : backend_(backend), block_n_(block_n), threads_(threads) {
  check_block("block_n", block_n);
  check_block("threads", threads);
  const CompileRequest request = tal_assign_spec().compile_request(
      "v1", {{"BLOCK_N", std::to_string(block_n)}, {"THREADS", std::to_string(threads)}});
  module_ = backend.compile(request);
  metrics_ = module_->kernel(request.name_expressions[0]);
  topk_ = module_->kernel(request.name_expressions[1]);
  resolve_ = module_->kernel(request.name_expressions[2]);
  gt_stats_ = module_->kernel(request.name_expressions[3]);
  targets_ = module_->kernel(request.name_expressions[4]);
  score_sum_ = module_->kernel(request.name_expressions[5]);
}

TalAssignment TalAssignOp::allocate(int batch, int max_gts, int anchors) const {
  const size_t ba = size_t(batch) * anchors, bg = size_t(batch) * max_gts;
  return {backend_.alloc_array<double>(bg * anchors),
          backend_.alloc_array<double>(bg * anchors),
          backend_.alloc_array<int>(ba),
          backend_.alloc_array<int>(ba),
          backend_.alloc_array<int>(ba),
          backend_.alloc_array<int>(bg * kTalTopkMax),
          backend_.alloc_array<double>(bg),
          backend_.alloc_array<double>(bg),
          backend_.alloc_array<int>(ba),
          backend_.alloc_array<double>(ba),
          backend_.alloc_array<double>(1),
          batch,
          max_gts,
          anchors};
}

void TalAssignOp::assign_into(const DeviceBuffer& boxes, const DeviceBuffer& logits, int classes,
                              const DeviceAnchorGrid& anchors, const DeviceGroundTruth& gts,
                              const loss::AssignerSettings& s, TalAssignment& out) const {
  for (const auto& [name, k] : {std::pair{"topk", s.topk}, std::pair{"topk2", s.topk2}})
    if (k < 1 || k > kTalTopkMax)
      throw UsageError(std::string("TalAssignOp: ") + name + "=" + std::to_string(k) + " is outside [1, " +
                       std::to_string(kTalTopkMax) + "]");
  const int batch = gts.batch, a = anchors.count;
  if (gts.max_class >= classes)
    throw UsageError("TalAssignOp: ground-truth class " + std::to_string(gts.max_class) + " outside [0, " +
                     std::to_string(classes) + ")");
  if (out.batch != batch || out.max_gts != gts.max_gts || out.anchors != a ||
      boxes.bytes() < size_t(batch) * 4 * a * sizeof(float) ||
      logits.bytes() < size_t(batch) * classes * a * sizeof(float))
    throw UsageError("TalAssignOp: the boxes, logits, ground truth (" + std::to_string(batch) + " images, " +
                     std::to_string(gts.max_gts) + " gts) and workspace sizes disagree");
  const TalAssignParams p{boxes.as<const float>(),
                          logits.as<const float>(),
                          anchors.x.as<const float>(),
                          anchors.y.as<const float>(),
                          anchors.stride.as<const float>(),
                          gts.boxes.as<const TalGt>(),
                          gts.counts.as<const int>(),
                          out.overlap.as<double>(),
                          out.align.as<double>(),
                          out.claim_count.as<int>(),
                          out.claim_first.as<int>(),
                          out.owner.as<int>(),
                          out.kept.as<int>(),
                          out.gt_max_align.as<double>(),
                          out.gt_max_overlap.as<double>(),
                          out.gt_of_anchor.as<int>(),
                          out.target_score.as<double>(),
                          out.target_score_sum.as<double>(),
                          batch,
                          a,
                          classes,
                          gts.max_gts,
                          s.topk,
                          s.topk2,
                          s.alpha,
                          s.beta,
                          s.eps,
                          s.small_side,
                          s.widened_side};
  backend_.launch(metrics_,
                  {{tiles(a, block_n_), unsigned(gts.max_gts), unsigned(batch)}, {unsigned(block_n_), 1, 1}},
                  kernel_params(p));
  backend_.launch(topk_, {{unsigned(gts.max_gts), unsigned(batch), 1}, {unsigned(threads_), 1, 1}},
                  kernel_params(p));
  backend_.launch(resolve_, {{tiles(a, block_n_), unsigned(batch), 1}, {unsigned(block_n_), 1, 1}},
                  kernel_params(p));
  backend_.launch(gt_stats_, {{unsigned(gts.max_gts), unsigned(batch), 1}, {unsigned(threads_), 1, 1}},
                  kernel_params(p));
  backend_.launch(targets_, {{tiles(a, block_n_), unsigned(batch), 1}, {unsigned(block_n_), 1, 1}},
                  kernel_params(p));
  backend_.launch(score_sum_, {{1, 1, 1}, {unsigned(kScoreSumThreads), 1, 1}}, kernel_params(p));
}

}  // namespace lab
