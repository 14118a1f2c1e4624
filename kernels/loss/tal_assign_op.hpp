// TalAssignOp: the task-aligned assignment of a batch on the device (tal_assign.cu), with the device forms of
// its inputs (anchor grid, padded ground truth) and its workspace. Outputs stay on the device:
// gt_of_anchor [B, A] (-1: background: the positives' mask with their gt), target_score [B, A] and
// target_score_sum [1] (float64).
#pragma once
#include <memory>
#include <vector>

#include "kernels/kernel_spec.hpp"
#include "kernels/loss/assign_types.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

// The spec of the tal_assign kernels (the runner's and the op's).
const KernelSpec& tal_assign_spec();

inline constexpr int kTalTopkMax = 16;  // LAB_TAL_TOPK_MAX of tal_assign.cu

// The parameters of a seeded assignment problem (B, IMGSZ, NC, GTS, TOPK, TOPK2) at these defaults, and the
// rule TOPK2 <= TOPK (UsageError naming `kernel`): shared by the tal_assign and yolo26_head_loss specs.
std::vector<ParamSpec> assign_problem_params(const char* batch, const char* imgsz, const char* classes,
                                             const char* gts);
void check_topk2_rule(const Params& p, const std::string& kernel);

struct DeviceAnchorGrid {
  DeviceBuffer x, y, stride;  // each [A] float
  int count = 0;
};
DeviceAnchorGrid upload_anchor_grid(Backend& backend, const AnchorGrid& anchors);

// Ground truth of a batch as [B, G] TalGt rows (G = the largest count, at least min_rows) and the counts [B].
struct DeviceGroundTruth {
  DeviceBuffer boxes, counts;
  int batch = 0, max_gts = 0;
  int max_class = -1;  // the largest class index (assign_into checks it against the logits' classes)
};
DeviceGroundTruth upload_ground_truth(Backend& backend, const std::vector<std::vector<loss::GtBox>>& gts,
                                      int min_rows = 1);
// The same into `out`, whose buffers are reused when large enough (a loss kept across calls). With `staging`
// the rows and counts go through it (grown by Backend::alloc_host when too small) by upload_async on the
// current lane, so the host need not wait for the launches before them; the caller then keeps `staging`
// unchanged until that lane's work so far is done.
void upload_ground_truth_into(Backend& backend, const std::vector<std::vector<loss::GtBox>>& gts,
                              int min_rows, DeviceGroundTruth& out, HostBuffer* staging = nullptr);
// The G upload_ground_truth gives these lists at min_rows = 1.
int max_ground_truth_rows(const std::vector<std::vector<loss::GtBox>>& gts);

// The workspace and outputs of one assignment of `batch` images, `max_gts` gts, `anchors` anchors.
struct TalAssignment {
  DeviceBuffer overlap, align, claim_count, claim_first, owner, kept, gt_max_align, gt_max_overlap;
  DeviceBuffer gt_of_anchor, target_score, target_score_sum;  // [B, A], [B, A], [1]
  int batch = 0, max_gts = 0, anchors = 0;
};

class TalAssignOp {
 public:
  // block_n: threads per CTA of the per-anchor steps; threads: of the per-gt steps (powers of two in
  // [32, 1024]; UsageError otherwise).
  explicit TalAssignOp(Backend& backend, int block_n = 256, int threads = 256);
  TalAssignment allocate(int batch, int max_gts, int anchors) const;
  // boxes [B, 4, A], logits [B, classes, A]. UsageError when topk or topk2 is outside [1, kTalTopkMax], a
  // gt class is not below `classes`, or the sizes disagree; the launches only (no synchronisation).
  void assign_into(const DeviceBuffer& boxes, const DeviceBuffer& logits, int classes,
                   const DeviceAnchorGrid& anchors, const DeviceGroundTruth& gts,
                   const loss::AssignerSettings& settings, TalAssignment& out) const;

 private:
  Backend& backend_;
  int block_n_, threads_;
  std::shared_ptr<Module> module_;
  Kernel metrics_, topk_, resolve_, gt_stats_, targets_, score_sum_;
};

}  // namespace lab
