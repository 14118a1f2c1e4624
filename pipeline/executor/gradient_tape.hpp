// GradientTape: reverse-mode differentiation of a forward built from our kernels, built once for a network
// and a batch shape and then replayed: building an op allocates its tensors, constructs its kernels' ops and
// records its forward launches and the backward it needs (what the forward keeps: a conv's input and its
// pre-activation z, a pool's input, the attention workspace); forward() replays the forward records in
// order, backward() the backward records in reverse. Nothing is allocated by a replay once every buffer
// exists (the first backward makes the gradient buffers and scratch; later ones reuse them), and nothing
// waits for the device: one stream orders every launch, so scratch freed after a record is reused by the
// next behind it. From the second run on, where the backend captures graphs, the forward and the backward
// are each captured once and replayed as one graph (a capture that fails leaves the launches direct and
// says why in graph_error()).
// Tensors are float32 [B, C, H, W] with dense H*W planes, addressed as PlaneViews: a tensor owns its buffer,
// or is a view of another's channels (a slice, a detached twin, and, fixed at the first forward, a concat
// part placed in its concat's buffer so that its producer writes it there and the concat copies nothing for
// it, and the same for a detect level in its anchors' buffer: place_parts). An op that needs plain pointers
// marks its tensors dense (a view gets a dense copy of its own). A tensor's gradient buffer is made once; in
// each backward it is written whole by its first contribution when that covers the tensor
// (GradientWrite::Overwrite: no memset), and later contributions add to it (Accumulate). A tensor that needs
// no gradient (the input, a detached feature) gets none, and the ops reading it skip their input gradient. A
// record whose output got no gradient is skipped: its contributions are all zero. A concat's part whose
// latest-built consumer is that concat has no gradient buffer of its own: its gradient is its channel slice
// of the concat's, so the concat's backward copies nothing for it; likewise a tensor read only by slices so
// aliased takes their run of the concat's, and a conv's residual whose latest reader is that conv takes the
// conv output's gradient (all decided at the first backward, then fixed: alias_gradients). Only tensors whose
// gradient readers all take strided views (a SiLU conv's output, a slice, a pool, an upsample) get a strided
// alias. A SiLU conv's output whose gradient is only the input gradient of one stride-1 conv reading it gets
// its SiLU backward from that input gradient's epilogue (its dz, not dy, in the gradient buffer: decided at
// the first backward, fold_silu_backwards). Each conv's folded weight and bias gradients (overwritten by
// every backward) and the weights its ops read are exposed per conv (convs()): a training engine folds its
// parameters into those weights and takes the chain rule from those gradients on the device; conv_gradients()
// downloads them. Tensors and gradients are float32; at a 16-bit precision each conv's forward, input- and
// weight-gradient products run on fp16 / bf16 tensor cores (the precision policy's arithmetic for the conv's
// role: the first conv built is the stem), accumulating in float. A conv marked ConvSpec::batch_statistics
// runs BatchNorm in train mode (gradient_tape_batchnorm.cpp): the conv without bias or activation
// (conv.weight) into u, then batchnorm_stats (the batch's mean and inverse standard deviation, and the
// running statistics moved by Ultralytics' momentum), batchnorm_apply (+ SiLU; a residual is added after it
// by silu_residual); the backward runs batchnorm_backward_reduce / _input (d bn.weight, d bn.bias and du, the
// statistics' terms included), then the conv's own backward on u. Float32 at every precision (only the conv's
// products are 16-bit). With synchronise_batch_statistics (data-parallel ranks, SyncBatchNorm) the
// per-channel sums are summed over every rank between the partial sums and the normalisation, in the forward
// and the backward (kernels/train/batchnorm_sync.cu).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention/psa_op.hpp"
#include "kernels/nn/conv2d_backward_op.hpp"
#include "kernels/nn/conv2d_op.hpp"
#include "kernels/nn/plane_backward_ops.hpp"
#include "kernels/nn/plane_ops.hpp"
#include "kernels/train/batchnorm_batch_op.hpp"
#include "kernels/train/batchnorm_sync_op.hpp"
#include "kernels/train/silu_residual_op.hpp"
#include "pipeline/executor/pixel_input.hpp"
#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/reference/ref_backward_ops.hpp"

namespace lab {

// A tensor of the tape: an index into it and its shape.
struct TapeTensor {
  int id = -1;
  int batch = 0, channels = 0, height = 0, width = 0;
  int64_t plane() const { return int64_t(height) * width; }
  size_t count() const { return size_t(batch) * channels * size_t(plane()); }
};

// The batch-statistics BatchNorm of a conv on the tape. gamma and beta start as the spec's bn.weight and
// bn.bias (a training engine rewrites them in place before a forward); every forward moves the running
// statistics at running_mean / running_var (the tape's own `running` copy of the spec's unless rebound,
// before the first forward, e.g. to a training engine's); d_gamma / d_beta are overwritten by every backward
// that reaches the conv.
struct TapeBatchNorm {
  ConvSpec unnormalised;              // what the conv's ops run: conv.weight, zero bias, no activation
  DeviceBuffer gamma, beta, running;  // [c_out], [c_out], [2 c_out]: running mean then var
  float* running_mean = nullptr;
  float* running_var = nullptr;
  DeviceBuffer mean, inv_std;    // [c_out] the last forward's batch statistics
  DeviceBuffer d_gamma, d_beta;  // [c_out] d loss / d bn.weight, bn.bias
  DeviceBuffer sums;  // the backward's per-channel sums (doubles), or the synchronised path's floats
};
// The BatchNorm of a conv marked batch_statistics, its buffers made and the spec's parameters uploaded.
std::unique_ptr<TapeBatchNorm> make_tape_batchnorm(Backend& backend, const ConvSpec& spec);

// Sums over data-parallel ranks for synchronised batch statistics: all_reduce_sum(device floats, count) adds
// every rank's values in place, ordered after the work already issued on the tape's backend (what
// Communicator::all_reduce_sum of pipeline/distributed does); `ranks` ranks take part, each running the same
// batch shape, so a channel's statistics are over ranks * batch * plane values.
struct BatchStatisticsSync {
  std::function<void(float* device_data, size_t count)> all_reduce_sum;
  int ranks = 1;
};

// One conv of the tape: its spec (the model's, which outlives the tape), the ops that run it (their weights
// start as spec.weight / spec.bias) and d loss / d its folded weight [c_out, c_in/groups, k, k] and bias
// [c_out] after a backward (zero where no gradient reached it). Under batch-statistics BatchNorm (`bn` set)
// the ops run bn->unnormalised and d_weight is d loss / d conv.weight (d_bias, the unnormalised conv's bias
// gradient, is unused: a sum of du, zero up to rounding).
// The input gradient runs on `input_grad`, the forward conv of dz with the weights transposed and flipped
// (pipeline/executor/input_grad_conv), where the conv's shape allows (stride 1, groups 1 or depthwise), else
// on `backward`.
struct TapeConv {
  const ConvSpec* spec = nullptr;
  std::unique_ptr<TapeBatchNorm> bn;
  std::unique_ptr<Conv2dOp> forward;
  std::unique_ptr<Conv2dBackwardOp> backward;
  std::unique_ptr<Conv2dOp> input_grad;  // null: backward computes the input gradient (or none is needed)
  DeviceBuffer d_weight, d_bias;

  // Where the fold writes the conv's weights for the input gradient, in the original (o, i, t) order; data
  // null when no input gradient is computed.
  ConvWeightLayout input_grad_weight_layout() const;
};

class GradientTape {
 public:
  explicit GradientTape(Backend& backend, Precision precision = Precision::Fp32);
  ~GradientTape();

  // A tensor that needs no gradient, its values set by set_input before a forward (the network input).
  TapeTensor input(int batch, int channels, int height, int width);
  void set_input(const TapeTensor& t, const std::vector<float>& values);
  // The same from RGB bytes [batch, height, width, 3] of a 3-channel input: values = bytes / 255, uploaded as
  // bytes (a quarter of the floats) and converted on the device (PixelInputOp).
  void set_input_pixels(const TapeTensor& t, std::span<const uint8_t> pixels);
  // The same from bytes already on the device (t.count() of them), converted by a launch on the main lane.
  void set_input_device_pixels(const TapeTensor& t, const uint8_t* device_pixels);
  // The same values, cut from the tape: no gradient flows back through it (Ultralytics' detach()).
  TapeTensor detach(const TapeTensor& x);

  // act(conv(x) + b) (+ residual), BatchNorm folded (spec.weight / spec.bias), or normalised with the
  // batch's statistics when spec.batch_statistics; `spec` must outlive the tape.
  TapeTensor conv(const ConvSpec& spec, const TapeTensor& x, const TapeTensor* residual = nullptr);
  TapeTensor slice(const TapeTensor& x, int first, int count);  // channels [first, first + count)
  TapeTensor concat(const std::vector<TapeTensor>& parts);      // along channels
  TapeTensor maxpool(const TapeTensor& x, int kernel);          // stride 1, padding kernel/2
  TapeTensor upsample(const TapeTensor& x);                     // nearest x2
  // PSA attention on qkv [B, nh*(2kd+hd), H, W]: (merged = v @ attn^T, v), as PsaOp::forward.
  std::pair<TapeTensor, TapeTensor> attention(const AttentionSpec& spec, const TapeTensor& qkv_in);
  // Levels [B, C, h_i, w_i] laid side by side along anchors: [B, C, 1, sum h_i w_i] (a detect head's output).
  TapeTensor anchors(const std::vector<TapeTensor>& levels);

  // Ops built between begin_branch() and end_branch() form the tape's one branch (the one-to-one head, on
  // detached features): its forward runs on a lane of its own beside the ops built after it, and its backward
  // on that lane from the backward's start beside everything else's; each lane has its own scratch and
  // split-K workspace. A branch op's backward may add only to the branch's own tensors (its inputs from
  // outside need no gradient), and no op after the branch may read a branch tensor: either throws
  // RuntimeError when the op is built. With synchronised batch statistics the branch runs in order.
  void begin_branch();
  void end_branch();

  // Launches every op's forward, in the order they were built. The first places concat parts (above); an op
  // built after it throws UsageError.
  void forward();
  const DeviceBuffer& buffer(const TapeTensor& t) const;
  // A loss's gradient: d loss / d t, a device buffer laid out like t.
  struct Seed {
    TapeTensor tensor;
    const DeviceBuffer* grad;
  };
  // Starts from the seeds and runs the backward records in reverse: then convs() hold every conv's folded
  // parameter gradients. A seed on a tensor that no op's backward adds to (a head's output) is read in place
  // as its gradient, not copied. The first backward fixes which gradients alias a concat's (none of its
  // seeds'); a later one throws UsageError for a seed on such a tensor, and building an op after it throws
  // too.
  void backward(const std::vector<Seed>& seeds);
  // The convs in the order the forward runs them.
  const std::vector<std::unique_ptr<TapeConv>>& convs() const { return convs_; }
  // The attention cores recorded (their variant: precision_policy's training_attention_variant).
  const std::vector<std::shared_ptr<const PsaOp>>& attentions() const { return attentions_; }
  // d loss / d the folded weight and bias of each conv, downloaded, by conv name (batch-statistics convs:
  // d conv.weight, and d bn.weight / d bn.bias in gamma / beta).
  reference::ConvGradients conv_gradients() const;
  // Each batch-statistics conv's running statistics, downloaded, by conv name.
  struct RunningStatistics {
    std::vector<float> mean, var;
  };
  std::map<std::string, RunningStatistics> running_statistics() const;
  // Sums the batch statistics over data-parallel ranks from now on (set before the first forward). The
  // tape then launches directly (no graph capture: the sums may wait on the host).
  void synchronise_batch_statistics(BatchStatisticsSync sync);
  // Empty unless a graph capture failed (then its error; the replays launch directly).
  const std::string& graph_error() const { return graph_error_; }

 private:
  struct Node {
    TapeTensor tensor;
    DeviceBuffer value;  // none for a view
    // A view: this tensor's values are channels [value_first, ...) of node value_of's, from pixel value_pixel
    // of their planes on (a slice, a detached twin, a tensor placed in its concat's buffer or a level placed
    // in its anchors' by place_parts).
    int value_of = -1, value_first = 0;
    int64_t value_pixel = 0;
    bool dense_value = false;  // an op reads or writes the values through a plain pointer: never placed
    DeviceBuffer grad;  // made by the first backward that reaches the tensor, then kept (none if aliased)
    int alias_of = -1;  // aliased: the tensor whose gradient holds this one, at grad_alias
    PlaneView grad_alias;
    bool grad_live = false;  // written by the running backward
    // A seed read in place as this tensor's gradient (the running backward's; a tensor no op's backward adds
    // to), else null.
    float* seed = nullptr;
    bool needs_grad = true;
    bool grad_view_ok = false;  // every backward reading this gradient takes a strided view: it may alias
    int last_reader = -1;       // the latest-built record whose backward adds to this gradient
    int readers = 0;            // the records whose backward adds to it
    // The latest-built conv record reading it that computes its input gradient.
    int input_grad_reader = -1;
    int silu_z = -1;           // a SiLU conv's output without residual: the tensor of its pre-activation z
    bool silu_folded = false;  // its SiLU backward runs in its reader's input gradient (fold_silu_backwards)
  };
  // A concat's (or anchors') record, its output and its parts, for alias_gradients and place_parts.
  struct ConcatRecord {
    int record;
    TapeTensor y;
    std::vector<TapeTensor> parts;
  };

  TapeTensor make(int batch, int channels, int height, int width, bool needs_grad = true);
  // A tensor whose values are channels [first, first + shape.channels) of `of`'s (no buffer of its own).
  TapeTensor make_view(const TapeTensor& of, int first, const TapeTensor& shape, bool needs_grad);
  // t for an op that reads or writes its values through a plain pointer: t itself, marked never to be
  // placed in a concat, or for a view a dense copy of it made by an op of its own.
  TapeTensor dense(const TapeTensor& t);
  // The node whose buffer holds t's values, and t's first channel in it.
  std::pair<int, int> value_root(int id) const;
  // Each concat part and anchors level whose values can live in the concat's (anchors') buffer is placed
  // there (its producer writes it in place, the concat copies nothing for it); the first forward's, before
  // anything runs. The rules at the definition.
  void place_parts();
  // t's gradient may become a view into a concat's (alias_gradients): every reader takes views.
  void allow_grad_view(const TapeTensor& t) { nodes_[size_t(t.id)].grad_view_ok = true; }
  float* data(const TapeTensor& t) const;
  PlaneView view(const TapeTensor& t) const;
  bool has_grad(const TapeTensor& t) const { return nodes_[size_t(t.id)].grad_live; }
  bool needs_grad(const TapeTensor& t) const { return nodes_[size_t(t.id)].needs_grad; }
  bool grad_aliased(const TapeTensor& t) const { return nodes_[size_t(t.id)].alias_of >= 0; }
  PlaneView grad_view(const TapeTensor& t) const;
  // Points each gradient that can be a view of another's at it: a concat part's at its slice of the concat's,
  // a tensor read only by slices at the concat's channels its slices' gradients are, a conv's residual at the
  // conv output's (the rules at the definition); the first backward's, before anything is written.
  void alias_gradients(const std::vector<Seed>& seeds);
  // Marks each SiLU conv output whose SiLU backward its one gradient reader's input-gradient conv applies
  // (the rules at the definition); the first backward's, after alias_gradients.
  void fold_silu_backwards(const std::vector<Seed>& seeds);
  // The slice records of x whose gradients tile x's at one concat's channels: that view, else data null.
  PlaneView sliced_alias(const TapeTensor& x) const;
  // The batch-statistics conv (gradient_tape_batchnorm.cpp); `c` has its ops and gradients made.
  TapeTensor batchnorm_conv(TapeConv& c, const TapeTensor& x, const TapeTensor* residual);
  // Backward of u = conv(x) from dz = d loss / d u: the conv's weight and bias gradients (the bias's left
  // alone when bias_summed: the SiLU backward wrote it), x's gradient. The weight gradient runs on lane 1
  // beside the input gradient on the main lane; with dz_stays (nothing writes dz again in this backward: a
  // scratch of this record, or a folded SiLU conv's gradient) it may keep running past the record, its
  // scratch held until the lanes join (join_weight_lane), else they join at the record's end.
  void conv_backward(const TapeConv& conv, const TapeTensor& x, const float* dz, bool bias_summed = false,
                     bool dz_stays = false);
  // The main lane waits for the weight gradients still running on lane 1; their scratch returns to the pool.
  void join_weight_lane();
  // x's gradient from dz (conv_backward's input-gradient half), on the current lane.
  void input_gradient(const TapeConv& conv, const TapeTensor& x, const float* dz);
  // Where a contribution to all of t's gradient goes, and how: the first of a backward overwrites.
  std::pair<PlaneView, GradientWrite> grad_target(const TapeTensor& t);
  // t's gradient channels [first, first + src channels) += src ([batch, channels, plane] view).
  void add_grad(const TapeTensor& t, ConstPlaneView src, int first, int channels);
  // A temporary of the running backward record, back in its lane's pool after it.
  float* scratch(size_t floats);
  float* zeros(size_t floats);  // a zero-filled scratch
  // An op's forward and backward; `reads`: the tensors whose gradients its backward adds to (id -1: none).
  void record(const std::vector<TapeTensor>& reads, std::function<void()> forward,
              std::function<void()> backward);
  // Runs `work` directly the first time; later, where the backend captures graphs, captures it once into
  // `graph` and replays that.
  void run_or_replay(std::unique_ptr<LaunchGraph>& graph, int& runs, const std::function<void()>& work);

  Backend& backend_;
  Precision precision_;
  NnKernels kernels_;
  NnBackwardKernels backward_kernels_;
  CopyPlanesOp copy_;
  AddPlanesOp add_;
  UpsampleNearest2xOp upsample_;
  UpsampleNearest2xBackwardOp upsample_backward_;
  SiluResidualOp activation_;  // a batch-statistics conv's activation + residual
  std::unique_ptr<BatchNormBatchOp> batchnorm_;  // made by the first batch-statistics conv
  std::unique_ptr<BatchNormSyncOp> batchnorm_sync_;
  std::optional<BatchStatisticsSync> sync_;
  std::vector<Node> nodes_;
  std::vector<std::function<void()>> forwards_, backwards_;
  std::vector<ConcatRecord> concats_, anchors_;
  // A slice's record (y = x's channels [first, ..)), and a conv's with a residual (y = conv(x) + res).
  struct SliceRecord {
    int record;
    TapeTensor x, y;
    int first;
  };
  struct ResidualRecord {
    int record;
    TapeTensor x, y, res;
  };
  std::vector<SliceRecord> slices_;
  std::vector<ResidualRecord> residuals_;
  bool aliases_fixed_ = false;  // by the first backward
  bool values_placed_ = false;  // by the first forward
  struct ScratchBuffer {
    DeviceBuffer buffer;
    bool busy = false;
    bool held = false;  // read by a weight gradient still running on lane 1: busy until the lanes join
  };
  // What the ops of one lane share in stream order: the backward's scratch pool and the split-K partial sums
  // of the convs' forwards and input gradients (the largest any of them needs, made by the first forward).
  struct LaneShared {
    std::vector<ScratchBuffer> scratch;
    size_t splitk_floats = 0;
    DeviceBuffer splitk_workspace;
  };
  static constexpr int kWeightLane = 1, kBranchLane = 2;
  LaneShared main_lane_, branch_lane_;
  LaneShared& building_lane() { return building_branch_ ? branch_lane_ : main_lane_; }
  LaneShared& running_lane() { return running_branch_ ? branch_lane_ : main_lane_; }
  // The branch's records [first, end) and tensors [first, end); -1 without a branch.
  int branch_first_record_ = -1, branch_end_record_ = -1, branch_first_node_ = -1, branch_end_node_ = -1;
  bool building_branch_ = false;  // between begin_branch() and end_branch()
  bool running_branch_ = false;   // the backward is issuing the branch's records
  bool branch_on_lane() const { return branch_end_record_ > branch_first_record_ && !sync_; }
  bool in_branch(int node) const { return node >= branch_first_node_ && node < branch_end_node_; }
  // Returns the running lane's scratch to its pool, but for the held buffers.
  void release_scratch();
  bool weight_lane_open_ = false;  // lane 1 was forked and not joined since
  size_t held_bytes_ = 0;          // of the held scratch
  std::vector<std::unique_ptr<TapeConv>> convs_;
  std::vector<std::shared_ptr<const PsaOp>> attentions_;
  std::unique_ptr<PixelInputOp> pixels_to_planes_;  // set_input_*pixels's, made on its first call
  DeviceBuffer input_pixels_;
  std::unique_ptr<LaunchGraph> forward_graph_, backward_graph_;
  int forward_runs_ = 0, backward_runs_ = 0;
  std::vector<const void*> graph_seeds_;  // the seed buffers the backward graph reads
  std::string graph_error_;
};

}  // namespace lab
