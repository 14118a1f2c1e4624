// DeviceTrainEngine: the arenas laid out per checkpoint parameter in for_each_conv order, the fold tables of
// each pass's ops, the launches of accumulate() and step(), and the downloads on request.
#include "pipeline/train/device_train_engine.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/distributed/communicator.hpp"
#include "pipeline/model/model_convs.hpp"

namespace lab::train {
namespace {

constexpr size_t kAlign = 4;  // floats: every tensor of an arena starts at a 16-byte boundary
constexpr size_t kBucketBytes = size_t(25) << 20;  // DistributedDataParallel's bucket_cap_mb

size_t aligned(size_t floats) {
  return (floats + kAlign - 1) / kAlign * kAlign;
}

std::string canonical_optimizer(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (lower == "sgd") return "SGD";
  if (lower == "adamw") return "AdamW";
  if (lower == "musgd") return "MuSGD";
  throw UsageError("optimizer '" + name + "': the device engine runs SGD, AdamW or MuSGD");
}

// Ultralytics' group of a checkpoint parameter: biases 2, BatchNorm weights 1, other weights 0.
int group_of(const std::string& name) {
  const auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (ends_with(".bias")) return 2;
  if (ends_with(".bn.weight")) return 1;
  return 0;
}

FoldTarget target_of(const ConvWeightLayout& l) {
  const int element = !l.half ? kFoldFloat32 : *l.half == HalfType::f16 ? kFoldF16 : kFoldBf16;
  return {l.data, l.out_stride, l.in_stride, l.tap_stride, element};
}

}  // namespace

DeviceTrainEngine::DeviceTrainEngine(Backend& backend, const Yolo26Model& model, const std::string& optimizer,
                                     int batch, int height, int width, Precision precision,
                                     Communicator* ranks)
    : backend_(backend),
      model_(model),
      optimizer_(canonical_optimizer(optimizer)),
      precision_(precision),
      hint_(batch, height, width),
      fold_(backend),
      clip_(backend),
      sgd_(backend),
      adamw_(backend),
      musgd_(backend),
      ranks_(ranks) {
  if (precision == Precision::Tf32)
    throw UsageError("precision tf32: the device engine trains in fp32, fp16 or bf16");
  if (precision == Precision::Fp16) scaler_.emplace();
  // The arenas: every checkpoint parameter, and the frozen statistics (running mean then var per conv).
  size_t total = 0, frozen = 0;
  std::vector<float> host_params, host_frozen;
  for_each_conv(model_, [&](ConvSpec& conv) {
    first_parameter_[conv.name] = parameters_.size();
    for (const ParameterRef& ref : conv_parameters(conv)) {
      Parameter p;
      p.name = ref.name;
      p.count = ref.values->size();
      p.offset = total;
      p.group = group_of(ref.name);
      p.shape = p.group == 0
                    ? std::vector<int64_t>{conv.c_out, conv.c_in / conv.groups, conv.kernel, conv.kernel}
                    : std::vector<int64_t>{conv.c_out};
      total += aligned(p.count);
      host_params.resize(total, 0.0f);
      std::copy(ref.values->begin(), ref.values->end(), host_params.begin() + long(p.offset));
      parameters_.push_back(std::move(p));
    }
    if (conv.bn) {
      frozen_offset_[conv.name] = frozen;
      host_frozen.insert(host_frozen.end(), conv.bn->mean.begin(), conv.bn->mean.end());
      host_frozen.insert(host_frozen.end(), conv.bn->var.begin(), conv.bn->var.end());
      frozen += 2 * size_t(conv.c_out);
    }
  });
  params_ = backend.upload_vector(host_params);
  grads_ = backend.alloc_array<float>(total);
  state0_ = backend.alloc_array<float>(total);
  if (optimizer_ != "SGD") state1_ = backend.alloc_array<float>(total);
  if (optimizer_ == "MuSGD") muon_update_ = backend.alloc_array<float>(total);
  for (const DeviceBuffer* b : {&grads_, &state0_, &state1_})
    if (b->get()) backend.fill_bytes(b->get(), 0, b->bytes());
  frozen_ = backend.upload_vector(host_frozen.empty() ? std::vector<float>{0.0f} : host_frozen);
  norms_ = backend.alloc_array<double>(first_parameter_.size());
  clip_out_ = backend.alloc_array<float>(2);

  std::vector<OptimTensor> tensors;
  for (const Parameter& p : parameters_) {
    OptimTensor t = in_place_tensor(
        arena(params_, p.offset), arena(grads_, p.offset), arena(state0_, p.offset),
        state1_.get() ? arena(state1_, p.offset) : nullptr, nullptr, (long long)p.count, p.group);
    MuonShape shape;  // MuSGD: every conv weight takes Muon's update, viewed [c_out, rest]
    if (muon_update_.get() && p.group == 0) {
      t.muon_update = arena(muon_update_, p.offset);
      shape = {int(p.shape[0]), int(p.count / size_t(p.shape[0])), muon_update_scale(p.shape)};
    }
    tensors.push_back(t);
    muon_shapes_.push_back(shape);
  }
  list_ = std::make_unique<OptimTensorList>(backend, std::move(tensors));
  std::vector<FoldConv> norm_entries;
  for_each_conv(model_, [&](const ConvSpec& conv) { norm_entries.push_back(checkpoint_entry(conv)); });
  norm_table_ = std::make_unique<FoldConvTable>(backend, std::move(norm_entries));
  // Whole parameters per bucket, from the last (the backward's first gradients) to the first.
  for (size_t end = total, i = parameters_.size(); i > 0;) {
    size_t begin = end;
    while (i > 0 && (begin == end || (end - parameters_[i - 1].offset) * sizeof(float) <= kBucketBytes))
      begin = parameters_[--i].offset;
    if (i == 0) begin = 0;
    buckets_.emplace_back(begin, end - begin);
    end = begin;
  }
  pass_for(batch, height, width);
}

FoldConv DeviceTrainEngine::checkpoint_entry(const ConvSpec& conv) const {
  const Parameter* p = &parameters_[first_parameter_.at(conv.name)];
  FoldConv f{};
  f.weight = arena(params_, p[0].offset);
  f.d_weight = arena(grads_, p[0].offset);
  if (conv.bn) {
    const size_t frozen = frozen_offset_.at(conv.name);
    f.gamma = arena(params_, p[1].offset), f.d_gamma = arena(grads_, p[1].offset);
    f.beta = arena(params_, p[2].offset), f.d_beta = arena(grads_, p[2].offset);
    f.mean = arena(frozen_, frozen), f.var = arena(frozen_, frozen + size_t(conv.c_out));
    f.eps = conv.bn->eps;
  } else {
    f.beta = arena(params_, p[1].offset), f.d_beta = arena(grads_, p[1].offset);
  }
  f.c_out = conv.c_out, f.inputs = conv.c_in / conv.groups, f.taps = conv.kernel * conv.kernel;
  return f;
}

std::unique_ptr<FoldConvTable> DeviceTrainEngine::fold_table(const TrainingPass& pass) const {
  std::map<std::string, const TapeConv*> by_name;
  for (const auto& c : pass.tape().convs()) by_name[c->spec->name] = c.get();
  std::vector<FoldConv> entries;
  for_each_conv(model_, [&](const ConvSpec& conv) {
    const auto it = by_name.find(conv.name);
    if (it == by_name.end())
      throw RuntimeError("device train engine: conv '" + conv.name + "' is not on the tape");
    const TapeConv& tc = *it->second;
    FoldConv f = checkpoint_entry(conv);
    f.folded[0] = target_of(tc.forward->weight_layout());
    f.folded[1] = target_of(tc.input_grad_weight_layout());
    f.d_folded_weight = tc.d_weight.as<const float>();
    if (!tc.bn) {
      f.folded_bias = tc.forward->bias_data();
      f.d_folded_bias = tc.d_bias.as<const float>();
      entries.push_back(f);
      return;
    }
    // Batch statistics: nothing to fold, every parameter is used as it is. Two entries without BatchNorm
    // (gamma null: the fold a copy, the chain rule the identity): conv.weight into the ops' layouts with
    // bn.bias as its "bias", copied into the tape's BatchNorm (the ops' own bias stays 0); and bn.weight as
    // the bias of a conv with no weights. Their chain rule adds the tape's d conv.weight, d bn.bias and
    // d bn.weight to the checkpoint gradients, times the fp16 loss scale's unscale.
    FoldConv weight = f;
    weight.gamma = nullptr;
    weight.folded_bias = tc.bn->beta.as<float>();
    weight.d_folded_bias = tc.bn->d_beta.as<const float>();
    entries.push_back(weight);
    FoldConv gamma{};
    gamma.beta = f.gamma, gamma.d_beta = f.d_gamma;
    gamma.c_out = conv.c_out, gamma.inputs = 0, gamma.taps = 1;
    gamma.folded_bias = tc.bn->gamma.as<float>();
    gamma.d_folded_bias = tc.bn->d_gamma.as<const float>();
    entries.push_back(gamma);
  });
  return std::make_unique<FoldConvTable>(backend_, std::move(entries));
}

DeviceTrainEngine::Pass& DeviceTrainEngine::pass_for(int batch, int height, int width) {
  const Shape shape{batch, height, width};
  if (auto it = passes_.find(shape); it != passes_.end()) return it->second;
  for (auto it = passes_.begin(); it != passes_.end();)  // keep the hint's beside the new one
    it = it->first == hint_ ? std::next(it) : passes_.erase(it);
  Pass& p = passes_[shape];
  p.pass = std::make_unique<TrainingPass>(backend_, model_, batch, height, width, precision_);
  for (const auto& c : p.pass->tape().convs())
    if (c->bn) {  // every pass moves the engine's running statistics
      const size_t frozen = frozen_offset_.at(c->spec->name);
      c->bn->running_mean = arena(frozen_, frozen);
      c->bn->running_var = arena(frozen_, frozen + size_t(c->spec->c_out));
    }
  if (sync_) p.pass->tape().synchronise_batch_statistics(*sync_);
  p.table = fold_table(*p.pass);
  return p;
}

std::string DeviceTrainEngine::describe() const {
  const std::string arithmetic = precision_ == Precision::Fp32
                                     ? "float32"
                                     : precision_name(precision_) + " products, float32 master weights";
  std::string text = "kernel backward (" + arithmetic + ") on " + backend_.name() + " (" +
                     backend_.device().name + "), " + optimizer_ + " on the device";
  for (const auto& [shape, pass] : passes_)
    if (const std::string& error = pass.pass->tape().graph_error(); !error.empty())
      return text + "; launched without graphs (the capture failed: " + error + ")";
  return text;
}

BatchLoss DeviceTrainEngine::accumulate(const TrainBatch& batch, const loss::LossConfig& config) {
  if (std::string problem = batch.size_problem(); !problem.empty()) throw UsageError(problem);
  Pass& p = pass_for(batch.batch, batch.height, batch.width);
  if (p.folded_version != version_) {
    fold_.fold(*p.table);
    p.folded_version = version_;
  }
  const double scale = scaler_ ? scaler_->scale() : 1.0;
  loss::SumOverRanks sum_over_ranks;
  if (ranks_)
    sum_over_ranks = [this](double* values, size_t count) { ranks_->all_reduce_sum_host(values, count); };
  const uint8_t* device_pixels = nullptr;
  if (!batch.pixels.empty()) {
    const bool staged = staged_host_ == batch.pixels.data() && staged_bytes_ == batch.pixels.size();
    join_copy_lane();
    staged_host_ = nullptr, staged_bytes_ = 0;
    if (staged) {
      current_pixels_ = 1 - current_pixels_;
    } else {
      DeviceBuffer& target = pixels_[current_pixels_];
      if (target.bytes() < batch.pixels.size()) target = backend_.alloc(batch.pixels.size());
      backend_.upload(target.get(), batch.pixels.data(), batch.pixels.size());
    }
    device_pixels = pixels_[current_pixels_].as<const uint8_t>();
    // The next stage()'s copy starts after everything before this batch's conversion: the other buffer's
    // last reader, the previous batch's conversion, included.
    backend_.fork_lane(kCopyLane);
    copy_lane_open_ = true;
  }
  const loss::DeviceLossResult& r =
      device_pixels
          ? p.pass->run_on_device_pixels(device_pixels, batch.ground_truth, config, scale, sum_over_ranks)
          : p.pass->run(batch.images, batch.ground_truth, config, scale, sum_over_ranks);
  fold_.backward(*p.table, 1.0 / scale);
  gradients_summed_ = false;
  BatchLoss out;
  out.one2many = r.one2many, out.one2one = r.one2one, out.weights = r.weights, out.total = r.total;
  return out;
}

void DeviceTrainEngine::stage(const TrainBatch& next) {
  if (next.pixels.empty()) return;
  if (std::string problem = next.size_problem(); !problem.empty()) throw UsageError(problem);
  DeviceBuffer& target = pixels_[1 - current_pixels_];
  if (target.bytes() < next.pixels.size()) {
    join_copy_lane();  // a copy into the old buffer may still be running
    target = backend_.alloc(next.pixels.size());
  }
  if (!copy_lane_open_) {  // no accumulate() of bytes yet: after everything so far
    backend_.fork_lane(kCopyLane);
    copy_lane_open_ = true;
  }
  backend_.use_lane(kCopyLane);
  backend_.upload_async(target.get(), next.pixels.data(), next.pixels.size());
  backend_.use_lane(0);
  staged_host_ = next.pixels.data(), staged_bytes_ = next.pixels.size();
}

void DeviceTrainEngine::join_copy_lane() {
  if (!copy_lane_open_) return;
  backend_.join_lane(kCopyLane);
  copy_lane_open_ = false;
}

DeviceTrainEngine::~DeviceTrainEngine() {
  join_copy_lane();
  backend_.synchronize();  // no copy is left reading a batch or writing a buffer about to be freed
}

void DeviceTrainEngine::sum_gradients_over_ranks() const {
  if (!ranks_ || gradients_summed_) return;
  for (const auto& [first, count] : buckets_) ranks_->all_reduce_sum(arena(grads_, first), count);
  gradients_summed_ = true;
}

double DeviceTrainEngine::step(const StepHyper& hyper) {
  sum_gradients_over_ranks();  // the clip's norm and the loss scaler's decision: the same on every rank
  float* norm = clip_out_.as<float>();
  clip_.run(*list_, float(hyper.max_norm), norm, norm + 1);
  // With a loss scaler (fp16) the norm gates the step on the device (a non-finite norm: nothing written), so
  // the host launches everything before it waits for the norm; the scaler then learns whether it stepped.
  optimizer_step(hyper, scaler_ ? norm : nullptr);
  backend_.fill_bytes(grads_.get(), 0, grads_.bytes());
  ++version_;  // every pass folds the new parameters before its next forward
  float total = 0;
  backend_.download(&total, norm, sizeof(float));
  if (scaler_ && !scaler_->update(std::isfinite(total))) --steps_;  // skipped: the count stays
  return total;
}

void DeviceTrainEngine::optimizer_step(const StepHyper& hyper, const float* gate) {
  ++steps_;
  const HalfType half = HalfType::f16;  // the kernels' default: the tensors carry no 16-bit copies here
  if (optimizer_ == "SGD") {
    SgdSettings s;
    s.lr = hyper.lr, s.momentum = hyper.momentum, s.weight_decay = hyper.weight_decay;
    sgd_.step(*list_, s, int(steps_), half, gate);
  } else if (optimizer_ == "AdamW") {
    AdamwSettings s;
    s.lr = hyper.lr, s.beta1 = hyper.momentum, s.weight_decay = hyper.weight_decay;
    adamw_.step(*list_, s, int(steps_), half, gate);
  } else {
    MusgdSettings s;  // muon.py's muon 0.5, sgd 0.5
    s.lr = hyper.lr, s.momentum = hyper.momentum, s.weight_decay = hyper.weight_decay;
    musgd_.step(*list_, muon_shapes_, s, half, gate);
  }
}

std::optional<LossScaleState> DeviceTrainEngine::loss_scale() const {
  if (!scaler_) return std::nullopt;
  return scaler_->state();
}

void DeviceTrainEngine::synchronise_batch_statistics() {
  if (!ranks_) return;
  Communicator* ranks = ranks_;
  sync_ = BatchStatisticsSync{[ranks](float* data, size_t count) { ranks->all_reduce_sum(data, count); },
                              ranks->size()};
  for (auto& [shape, pass] : passes_) pass.pass->tape().synchronise_batch_statistics(*sync_);
}

std::vector<std::pair<std::string, double>> DeviceTrainEngine::gradient_norms() const {
  sum_gradients_over_ranks();
  const FoldConvTable& table = *norm_table_;
  fold_.grad_norms(table, norms_.as<double>());
  const std::vector<double> norms = backend_.download_vector<double>(norms_, size_t(table.size()));
  std::vector<std::pair<std::string, double>> out;
  size_t i = 0;
  for_each_conv(model_, [&](const ConvSpec& conv) { out.emplace_back(conv.name, norms[i++]); });
  return out;
}

std::vector<float> DeviceTrainEngine::download(const DeviceBuffer& arena, const Parameter& p) const {
  std::vector<float> v(p.count);
  backend_.download(v.data(), arena.as<const float>() + p.offset, p.count * sizeof(float));
  return v;
}

std::vector<ParameterGradient> DeviceTrainEngine::gradients() const {
  const std::vector<float> all = backend_.download_vector<float>(grads_, grads_.bytes() / sizeof(float));
  std::vector<ParameterGradient> out;
  for (const Parameter& p : parameters_)
    out.push_back(
        {p.name, p.shape,
         std::vector<double>(all.begin() + long(p.offset), all.begin() + long(p.offset + p.count))});
  return out;
}

void DeviceTrainEngine::read_parameters(Yolo26Model& model) const {
  const std::vector<float> all = backend_.download_vector<float>(params_, params_.bytes() / sizeof(float));
  const std::vector<float> running =
      backend_.download_vector<float>(frozen_, frozen_.bytes() / sizeof(float));
  size_t i = 0;
  for_each_conv(model, [&](ConvSpec& conv) {
    if (const auto it = frozen_offset_.find(conv.name); it != frozen_offset_.end() && conv.bn) {
      // the running statistics: batch-statistics BatchNorm moved them, frozen BatchNorm left them
      const auto mean = running.begin() + long(it->second), var = mean + conv.c_out;
      conv.bn->mean.assign(mean, var);
      conv.bn->var.assign(var, var + conv.c_out);
    }
    for (const ParameterRef& ref : conv_parameters(conv)) {
      if (i >= parameters_.size() || parameters_[i].name != ref.name ||
          parameters_[i].count != ref.values->size())
        throw UsageError("device train engine: the model's parameter '" + ref.name +
                         "' is not the engine's (another network?)");
      const Parameter& p = parameters_[i++];
      std::copy(all.begin() + long(p.offset), all.begin() + long(p.offset + p.count), ref.values->begin());
    }
    fold_batchnorm(conv);
  });
  if (i != parameters_.size()) throw UsageError("device train engine: the model has fewer parameters");
}

std::vector<std::pair<const DeviceBuffer*, std::string>> DeviceTrainEngine::state_buffers() const {
  if (optimizer_ == "SGD") return {{&state0_, ".momentum"}};
  if (optimizer_ == "AdamW") return {{&state0_, ".exp_avg"}, {&state1_, ".exp_avg_sq"}};
  return {{&state0_, ".momentum"}, {&state1_, ".muon_momentum"}};
}

OptimizerState DeviceTrainEngine::optimizer_state() const {
  OptimizerState s;
  s.name = optimizer_;
  s.steps = steps_;
  s.loss_scale = loss_scale();
  const auto buffers = state_buffers();
  for (size_t i = 0; i < parameters_.size(); ++i)
    for (size_t k = 0; k < buffers.size(); ++k)
      if (k == 0 || optimizer_ != "MuSGD" ||
          muon_shapes_[i].rows > 0)  // MuSGD: Muon's buffer where it has one
        s.tensors[parameters_[i].name + buffers[k].second] = download(*buffers[k].first, parameters_[i]);
  return s;
}

void DeviceTrainEngine::load_optimizer_state(const OptimizerState& state) {
  if (state.name != optimizer_)
    throw UsageError("optimizer state of " + state.name + ", but this run's optimizer is " + optimizer_);
  if (state.steps < 0) throw UsageError("optimizer state: a negative step count");
  if (state.loss_scale.has_value() != scaler_.has_value())
    throw UsageError(std::string("optimizer state: ") +
                     (scaler_ ? "no loss scale for this fp16 run" : "a loss scale (fp16) for this run of " +
                                                                        precision_name(precision_)));
  if (state.loss_scale && !(state.loss_scale->scale > 0 && std::isfinite(state.loss_scale->scale)))
    throw UsageError("optimizer state: the loss scale is not a positive number");
  // As HostTrainEngine reads a state: a missing tensor is zero, but the first buffer after a step; every
  // tensor of the state names a parameter and has its size. All checked before anything is written.
  const auto buffers = state_buffers();
  size_t used = 0;
  for (const Parameter& p : parameters_)
    for (size_t k = 0; k < buffers.size(); ++k) {
      const std::string key = p.name + buffers[k].second;
      const auto it = state.tensors.find(key);
      if (it == state.tensors.end()) {
        if (k == 0 && state.steps > 0)
          throw UsageError("optimizer state: no " + key + " after " + std::to_string(state.steps) + " steps");
        continue;
      }
      if (it->second.size() != p.count)
        throw UsageError("optimizer state: " + key + " has " + std::to_string(it->second.size()) +
                         " values, the parameter " + std::to_string(p.count));
      ++used;
    }
  if (used != state.tensors.size())
    throw UsageError("optimizer state: " + std::to_string(state.tensors.size() - used) +
                     " tensors name no parameter of the model");
  for (const Parameter& p : parameters_)
    for (const auto& [buffer, suffix] : buffers) {
      float* slice = buffer->as<float>() + p.offset;
      const auto it = state.tensors.find(p.name + suffix);
      if (it == state.tensors.end())
        backend_.fill_bytes(slice, 0, p.count * sizeof(float));
      else
        backend_.upload(slice, it->second.data(), p.count * sizeof(float));
    }
  steps_ = state.steps;
  if (scaler_) scaler_.emplace(*state.loss_scale);
}

}  // namespace lab::train
