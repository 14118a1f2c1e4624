// The runners of nhwc_layers.cu, one per entry, each through NhwcLayerOps (what the network calls):
// nhwc_pack_input, nhwc_depthwise3x3, nhwc_maxpool, nhwc_upsample2x, nhwc_copy, nhwc_to_planes. Inputs are
// seeded values rounded to the element type in a channel slice [IN_OFFSET, IN_OFFSET + C) of a buffer of
// IN_PITCH channels whose other channels hold NaN poison (the kernels must never read them); NHWC outputs go
// into the slice [OUT_OFFSET, OUT_OFFSET + C) of a wider poisoned buffer whose other channels must keep their
// poison (the concatenation's neighbours). References: the float64 ones of the NCHW float32 kernels
// (maxpool2d_reference, upsample_nearest2x_reference, conv2d_reference with groups = C) on the rounded
// values, laid out as pixels; pack_input, copy and to_planes are checked against the values they move.
// The moving ops and the pool round nothing new: exact (tolerance 0); depthwise3x3 rounds its float sum once.
#include <cstring>
#include <functional>

#include "kernels/nn/conv2d_inputs.hpp"
#include "kernels/nn/conv2d_reference.hpp"
#include "kernels/nn/nhwc_layers_op.hpp"
#include "kernels/nn/nhwc_runner_support.hpp"
#include "kernels/nn/plane_reference.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

using K = ParamSpec::Kind;

// The channels of a pixel group the pack writes: R, G, B and five zeros.
constexpr int kPackedChannels = 8;

ParamSpec slice_offset_param(const std::string& prefix, const char* help) {
  return {prefix + "_OFFSET", K::Int, "0", help, 0, 2048, false, {}, 8};
}

ParamSpec slice_pitch_param(const std::string& prefix, const char* help) {
  return {prefix + "_PITCH", K::Int, "0", help, 0, 4096, false, {}, 8};
}

// The channels the slices of a runner hold: C, or the pack's 8.
int slice_channels(const Params& p) {
  return p.count("C") ? int(param_int(p, "C")) : kPackedChannels;
}

// Which NHWC slices a runner places with parameters (IN_OFFSET / IN_PITCH, OUT_OFFSET / OUT_PITCH). Those
// with an input have channels C; the pack's output has 8.
enum class Slices { output, input_output, input };

// A runner of nhwc_layers.cu: parameters B, [C,] H (`h_help`), W, `own`, the slices', DTYPE; one variant
// v1_vec8; the family's one compile for the element type. Rules: the slices' pitches (when given) hold their
// channels, then `rule`.
KernelSpec nhwc_layer_spec(const char* name, const char* description, const char* h_help, Slices slices,
                           std::vector<ParamSpec> own = {}, std::function<void(const Params&)> rule = {}) {
  const bool input = slices != Slices::output, output = slices != Slices::input;
  std::vector<ParamSpec> params = {{"B", K::Int, "1", "batch", 1, 256}};
  if (input) params.push_back({"C", K::Int, "24", "channels", 1, 1024});
  params.push_back({"H", K::Int, "13", h_help, 1, 2048});
  params.push_back({"W", K::Int, "11", "width (of the input)", 1, 2048});
  params.insert(params.end(), own.begin(), own.end());
  if (input) {
    params.push_back(slice_offset_param("IN", "first channel of the input slice"));
    params.push_back(
        slice_pitch_param("IN", "channels per input pixel in memory (0: IN_OFFSET + C rounded up to 8)"));
  }
  if (output) {
    params.push_back(slice_offset_param("OUT", "first channel of the output slice"));
    params.push_back(
        slice_pitch_param("OUT", input ? "channels per output pixel in memory (0: OUT_OFFSET + C "
                                         "rounded up to 8)"
                                       : "channels per output pixel in memory (0: OUT_OFFSET + 8)"));
  }
  params.push_back(nhwc_dtype_param());
  const std::string spec_name = name;
  return {.name = name,
          .family = "nn",
          .description = description,
          .source = "nn/nhwc_layers.cu",
          .variants = {{"v1_vec8",
                        "one thread per pixel and 8-channel group: 16-byte loads and stores (two in float)"}},
          .params = params,
          .validate =
              [spec_name, rule](const Params& p) {
                for (const char* prefix : {"IN", "OUT"}) {
                  const std::string pitch = std::string(prefix) + "_PITCH",
                                    offset = std::string(prefix) + "_OFFSET";
                  if (!p.count(pitch) || param_int(p, pitch) == 0) continue;
                  if (param_int(p, pitch) < param_int(p, offset) + slice_channels(p))
                    throw UsageError("parameter " + pitch + "=" + p.at(pitch) + " of " + spec_name +
                                     " is invalid: below " + offset + " + the " +
                                     std::to_string(slice_channels(p)) + " channels");
                }
                if (rule) rule(p);
              },
          .compile =
              [](const std::string&, const Params& p) {
                return nhwc_layers_compile_request(parse_activation_type(param_str(p, "DTYPE")));
              }};
}

const KernelSpec& pack_input_spec() {
  static const KernelSpec spec =
      nhwc_layer_spec("nhwc_pack_input",
                      "float NCHW [B,3,H,W] network input -> NHWC fp16/bf16/f32, 8 channels (RGB, 5 zeros)",
                      "height", Slices::output);
  return spec;
}

const KernelSpec& depthwise3x3_spec() {
  static const KernelSpec spec = nhwc_layer_spec(
      "nhwc_depthwise3x3",
      "depthwise 3x3 conv (+bias, SiLU, residual) on NHWC fp16/bf16/f32, float weights [C][9], into a "
      "channel "
      "slice",
      "height", Slices::input_output,
      {{"SILU", K::Bool, "true", "SiLU after the bias"},
       {"RESIDUAL", K::Bool, "false", "add a residual of the output's shape after the activation"}});
  return spec;
}

const KernelSpec& maxpool_spec() {
  static const KernelSpec spec = nhwc_layer_spec(
      "nhwc_maxpool", "max pool K (odd), stride 1, padding K/2 with -inf (SPPF) on NHWC fp16/bf16/f32 slices",
      "height", Slices::input_output, {{"K", K::Int, "5", "window size (odd)", 1, 31}}, [](const Params& p) {
        if (param_int(p, "K") % 2 == 0)
          throw UsageError("parameter K=" + p.at("K") +
                           " of nhwc_maxpool is invalid: must be odd (padding K/2)");
      });
  return spec;
}

const KernelSpec& upsample2x_spec() {
  static const KernelSpec spec = nhwc_layer_spec(
      "nhwc_upsample2x",
      "nearest x2 upsampling on NHWC fp16/bf16/f32: [B,H,W] -> [B,2H,2W] into a channel slice",
      "input height", Slices::input_output);
  return spec;
}

const KernelSpec& copy_spec() {
  static const KernelSpec spec = nhwc_layer_spec(
      "nhwc_copy",
      "channel-slice copy between NHWC fp16/bf16/f32 tensors (a Concat input feeding two concats)", "height",
      Slices::input_output);
  return spec;
}

const KernelSpec& to_planes_spec() {
  static const KernelSpec spec = nhwc_layer_spec(
      "nhwc_to_planes",
      "NHWC fp16/bf16/f32 [B,H*W] x C -> float planes [B,C,A] at anchor offset FIRST (the detect head's "
      "outputs)",
      "height", Slices::input,
      {{"FIRST", K::Int, "5", "first anchor the pixels go to", 0, 1 << 24},
       {"ANCHORS", K::Int, "0", "anchors per plane (0: FIRST + H*W + 3)", 0, 1 << 24}},
      [](const Params& p) {
        const int64_t end = param_int(p, "FIRST") + param_int(p, "H") * param_int(p, "W");
        if (param_int(p, "ANCHORS") && param_int(p, "ANCHORS") < end)
          throw UsageError("parameter ANCHORS=" + p.at("ANCHORS") +
                           " of nhwc_to_planes is invalid: below FIRST + H*W = " + std::to_string(end));
      });
  return spec;
}

// Channels [offset, offset + channels) of every pixel of a [pixels][pitch] buffer.
struct Slice {
  int offset, pitch;
};

Slice slice_param(const Params& p, const std::string& prefix, int channels) {
  const int offset = int(param_int(p, prefix + "_OFFSET")), given = int(param_int(p, prefix + "_PITCH"));
  return {offset, given ? given : nhwc_min_pitch(offset + channels)};
}

NhwcView view_of(const DeviceBuffer& buffer, const Slice& s, ActivationType type) {
  return {buffer.as<unsigned char>() + size_t(s.offset) * size_t(activation_bytes(type)), s.pitch};
}

// What every runner holds: the sizes, the element type and the ops (one compile of the family).
struct LayerSizes {
  int batch, channels, h, w;
  ActivationType type;
  explicit LayerSizes(const Params& p)
      : batch(int(param_int(p, "B"))),
        channels(slice_channels(p)),
        h(int(param_int(p, "H"))),
        w(int(param_int(p, "W"))),
        type(parse_activation_type(param_str(p, "DTYPE"))) {}
  int64_t plane() const { return int64_t(h) * w; }
};

// Seeded values in [-1, 1) rounded to the element type ([batch][channels][plane], as floats) and their
// upload into slice `s` of a buffer whose other channels hold NaN poison.
struct SeededTensor {
  std::vector<float> nchw;
  DeviceBuffer buffer;
  SeededTensor(Backend& backend, const LayerSizes& n, int64_t plane, const Slice& s, uint64_t seed)
      : nchw(rounded_to(random_uniform(size_t(n.batch) * n.channels * size_t(plane), -1.0f, 1.0f, seed),
                        n.type)),
        buffer(backend.upload_vector(to_nhwc(nchw, n.type, n.batch, n.channels, plane, s.pitch, s.offset))) {}
};

// What is each slice-to-slice op's own: its output plane, launch, float64 reference ([batch][C][plane]),
// tolerance and operations per output element.
struct DepthwiseCase {
  Conv2dShape shape;
  Conv2dInputs inputs;
  std::vector<float> residual;  // rounded; empty without RESIDUAL
  DeviceBuffer residual_buffer;
  std::optional<NhwcDepthwise> op;
  DepthwiseCase(Backend& backend, const NhwcLayerOps& ops, const LayerSizes& n, const Params& p,
                uint64_t seed)
      : shape{.c_in = n.channels,
              .c_out = n.channels,
              .kernel = 3,
              .stride = 1,
              .groups = n.channels,
              .silu = param_bool(p, "SILU")},
        inputs(conv2d_random_inputs(shape, n.batch, n.h, n.w, derive_seed(seed, "weights"))) {
    if (param_bool(p, "RESIDUAL")) {
      SeededTensor r(backend, n, n.plane(), {0, nhwc_min_pitch(n.channels)}, derive_seed(seed, "residual"));
      residual = std::move(r.nchw);
      residual_buffer = std::move(r.buffer);
    }
    op.emplace(ops, n.channels, inputs.weight, inputs.bias, shape.silu);
  }
  static int64_t out_plane(const LayerSizes& n) { return n.plane(); }
  void run(const NhwcLayerOps&, const LayerSizes& n, NhwcView in, NhwcView out) const {
    op->run(
        n.batch, n.h, n.w, in, out,
        residual.empty() ? NhwcView{} : view_of(residual_buffer, {0, nhwc_min_pitch(n.channels)}, n.type));
  }
  std::vector<double> reference(const std::vector<float>& in, const LayerSizes& n) const {
    return conv2d_reference(shape, n.batch, n.h, n.w, in, inputs.weight, inputs.bias, residual);
  }
  // Products of 16-bit (or float) inputs and float32 weights summed in float (9 terms, relative error
  // ~1e-7); what remains is the output's one rounding to the element type (f32: none).
  Tolerance tolerance(const LayerSizes& n, const std::vector<double>& ref) const {
    return one_unit_tolerance(n.type, ref);
  }
  double flops_per_output() const { return 2.0 * 9 + 2; }
};

struct MaxPoolCase {
  int kernel;
  MaxPoolCase(Backend&, const NhwcLayerOps&, const LayerSizes&, const Params& p, uint64_t)
      : kernel(int(param_int(p, "K"))) {}
  static int64_t out_plane(const LayerSizes& n) { return n.plane(); }
  void run(const NhwcLayerOps& ops, const LayerSizes& n, NhwcView in, NhwcView out) const {
    ops.maxpool(n.batch, n.h, n.w, n.channels, kernel, in, out);
  }
  std::vector<double> reference(const std::vector<float>& in, const LayerSizes& n) const {
    return maxpool2d_reference(in, n.batch, n.channels, n.h, n.w, kernel);
  }
  Tolerance tolerance(const LayerSizes&, const std::vector<double>&) const { return {0, 0}; }
  double flops_per_output() const { return double(kernel) * kernel; }
};

struct UpsampleCase {
  UpsampleCase(Backend&, const NhwcLayerOps&, const LayerSizes&, const Params&, uint64_t) {}
  static int64_t out_plane(const LayerSizes& n) { return 4 * n.plane(); }
  void run(const NhwcLayerOps& ops, const LayerSizes& n, NhwcView in, NhwcView out) const {
    ops.upsample2x(n.batch, n.h, n.w, n.channels, in, out);
  }
  std::vector<double> reference(const std::vector<float>& in, const LayerSizes& n) const {
    return upsample_nearest2x_reference(in, n.batch, n.channels, n.h, n.w);
  }
  Tolerance tolerance(const LayerSizes&, const std::vector<double>&) const { return {0, 0}; }
  double flops_per_output() const { return 0; }
};

struct CopyCase {
  CopyCase(Backend&, const NhwcLayerOps&, const LayerSizes&, const Params&, uint64_t) {}
  static int64_t out_plane(const LayerSizes& n) { return n.plane(); }
  void run(const NhwcLayerOps& ops, const LayerSizes& n, NhwcView in, NhwcView out) const {
    ops.copy(n.batch * n.plane(), n.channels, in, out);
  }
  std::vector<double> reference(const std::vector<float>& in, const LayerSizes&) const {
    return {in.begin(), in.end()};
  }
  Tolerance tolerance(const LayerSizes&, const std::vector<double>&) const { return {0, 0}; }
  double flops_per_output() const { return 0; }
};

// One NHWC input slice -> one NHWC output slice.
template <class Case>
class SliceInstance : public InstanceBase {
 public:
  SliceInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        n_(p),
        ops_(backend, n_.type),
        in_slice_(slice_param(p, "IN", n_.channels)),
        out_slice_(slice_param(p, "OUT", n_.channels)),
        in_(backend, n_, n_.plane(), in_slice_, derive_seed(seed, "in")),
        out_(output_array<unsigned char>(out_bytes())),
        case_(backend, ops_, n_, p, seed) {}

  void launch() override {
    case_.run(ops_, n_, view_of(in_.buffer, in_slice_, n_.type), view_of(out_, out_slice_, n_.type));
  }

  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const std::vector<double> ref =
        nchw_to_pixels(case_.reference(in_.nchw, n_), n_.batch, n_.channels, Case::out_plane(n_));
    return check_nhwc_slice(fetch<unsigned char>(out_, out_bytes()),
                            {size_t(n_.batch), size_t(Case::out_plane(n_)), size_t(n_.channels)},
                            out_slice_.pitch, out_slice_.offset, n_.type, ref,
                            tol.value_or(case_.tolerance(n_, ref)));
  }

  WorkCounts work() const override {
    const double outputs = double(n_.batch) * Case::out_plane(n_) * n_.channels;
    return {double(activation_bytes(n_.type)) * (double(in_.nchw.size()) + outputs),
            outputs * case_.flops_per_output()};
  }

 private:
  size_t out_bytes() const {
    return size_t(n_.batch) * size_t(Case::out_plane(n_)) * size_t(out_slice_.pitch) *
           size_t(activation_bytes(n_.type));
  }

  LayerSizes n_;
  NhwcLayerOps ops_;
  Slice in_slice_, out_slice_;
  SeededTensor in_;
  DeviceBuffer out_;
  Case case_;
};

// The network input (RGB / 255 in [0, 1)) -> 8 channels a pixel.
class PackInputInstance : public InstanceBase {
 public:
  PackInputInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        n_(p),
        ops_(backend, n_.type),
        out_slice_(slice_param(p, "OUT", kPackedChannels)),
        in_host_(
            random_uniform(size_t(n_.batch) * 3 * size_t(n_.plane()), 0.0f, 1.0f, derive_seed(seed, "in"))),
        in_(backend.upload_vector(in_host_)),
        out_(output_array<unsigned char>(out_bytes())) {}

  void launch() override {
    ops_.pack_input(n_.batch, n_.h, n_.w, in_.as<const float>(), view_of(out_, out_slice_, n_.type));
  }

  // Channels 0..2: the input rounded to nearest even (half_type.cpp's conversion); 3..7: zero.
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const std::vector<float> rgb = rounded_to(in_host_, n_.type);
    std::vector<double> ref(size_t(n_.batch) * size_t(n_.plane()) * kPackedChannels, 0.0);
    for (int b = 0; b < n_.batch; ++b)
      for (int c = 0; c < 3; ++c)
        for (int64_t i = 0; i < n_.plane(); ++i)
          ref[(size_t(b) * n_.plane() + size_t(i)) * kPackedChannels + c] =
              rgb[(size_t(b) * 3 + c) * n_.plane() + i];
    return check_nhwc_slice(fetch<unsigned char>(out_, out_bytes()),
                            {size_t(n_.batch), size_t(n_.plane()), size_t(kPackedChannels)}, out_slice_.pitch,
                            out_slice_.offset, n_.type, ref, tol.value_or(Tolerance{0, 0}));
  }

  WorkCounts work() const override {
    return {double(n_.batch) * n_.plane() * (4.0 * 3 + double(activation_bytes(n_.type)) * kPackedChannels),
            0};
  }

 private:
  size_t out_bytes() const {
    return size_t(n_.batch) * size_t(n_.plane()) * size_t(out_slice_.pitch) *
           size_t(activation_bytes(n_.type));
  }

  LayerSizes n_;
  NhwcLayerOps ops_;
  Slice out_slice_;
  std::vector<float> in_host_;
  DeviceBuffer in_, out_;
};

// One detect level [B, H*W] x C -> anchors [FIRST, FIRST + H*W) of float planes [B, C, ANCHORS].
class ToPlanesInstance : public InstanceBase {
 public:
  ToPlanesInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        n_(p),
        ops_(backend, n_.type),
        in_slice_(slice_param(p, "IN", n_.channels)),
        first_(int(param_int(p, "FIRST"))),
        anchors_(param_int(p, "ANCHORS") ? int(param_int(p, "ANCHORS")) : first_ + int(n_.plane()) + 3),
        in_(backend, n_, n_.plane(), in_slice_, derive_seed(seed, "in")),
        out_(output_array<float>(out_elements())) {}

  void launch() override {
    ops_.to_planes(n_.batch, int(n_.plane()), n_.channels, view_of(in_.buffer, in_slice_, n_.type),
                   out_.as<float>(), anchors_, first_);
  }

  // The level's anchors must hold the input exactly; every other anchor must keep its poison.
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const std::vector<uint32_t> all = fetch<uint32_t>(out_, out_elements());
    std::vector<float> window, changed;
    for (size_t row = 0; row < size_t(n_.batch) * n_.channels; ++row)
      for (int a = 0; a < anchors_; ++a) {
        const uint32_t bits = all[row * anchors_ + a];
        float value;
        std::memcpy(&value, &bits, sizeof value);
        if (a >= first_ && a < first_ + n_.plane())
          window.push_back(value);
        else
          changed.push_back(bits == 0xffffffffu ? 0.0f : 1.0f);
      }
    return {make_check("out", {size_t(n_.batch), size_t(n_.channels), size_t(n_.plane())}, window,
                       {in_.nchw.begin(), in_.nchw.end()}, tol.value_or(Tolerance{0, 0})),
            make_check("out_neighbours", {changed.size()}, changed, std::vector<double>(changed.size(), 0.0),
                       Tolerance{0, 0}, false)};
  }

  WorkCounts work() const override {
    return {(double(activation_bytes(n_.type)) + 4.0) * double(in_.nchw.size()), 0};
  }

 private:
  size_t out_elements() const { return size_t(n_.batch) * size_t(n_.channels) * size_t(anchors_); }

  LayerSizes n_;
  NhwcLayerOps ops_;
  Slice in_slice_;
  int first_, anchors_;
  SeededTensor in_;
  DeviceBuffer out_;
};

const bool registered = register_runner(pack_input_spec(), make_instance<PackInputInstance>()) &&
                        register_runner(depthwise3x3_spec(), make_instance<SliceInstance<DepthwiseCase>>()) &&
                        register_runner(maxpool_spec(), make_instance<SliceInstance<MaxPoolCase>>()) &&
                        register_runner(upsample2x_spec(), make_instance<SliceInstance<UpsampleCase>>()) &&
                        register_runner(copy_spec(), make_instance<SliceInstance<CopyCase>>()) &&
                        register_runner(to_planes_spec(), make_instance<ToPlanesInstance>());

}  // namespace
}  // namespace lab
