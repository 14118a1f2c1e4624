// The launch plan of one input shape for the 16-bit NHWC network (--layout nhwc): the stem reading the
// float32 NCHW input (conv2d_stem_nhwc; where it does not run the stem's shape, the input packed to NHWC
// pitch 8 for conv2d_nhwc), every module of spec/yolo26.md on fp16 / bf16 NHWC views in one arena through
// NhwcOps (wgmma + TMA dense convs with fused bias / SiLU / residual / concat slice, depthwise, maxpool into
// the SPPF slices, upsample into the concat slice, the PSA attention on NHWC views), the Detect head's
// branches on lanes ending in to_planes into the float [B, 4, A] / [B, nc, A] planes the float32 decode and
// top-k read. The module walk and the tail are PlanWalk's (plan_walk.hpp), shared with the NCHW plan.
#pragma once
#include <memory>
#include <vector>

#include "pipeline/executor/nhwc_ops.hpp"
#include "pipeline/executor/shape_plan.hpp"

namespace lab {

// The modules a plan of this shape compiles beyond the ops' (its PSA attention's), for Backend::precompile.
std::vector<CompileRequest> nhwc_plan_compile_requests(const Yolo26Model& model, ActivationType type);

// Builds the plan (a measuring pass sizes the arena, then the real pass allocates and records).
std::unique_ptr<ShapePlan> build_nhwc_plan(NhwcOps& ops, const Yolo26Model& model, int batch, int height,
                                           int width);

}  // namespace lab
