// Comparison of a kernel output with its reference: metrics, tolerances, verdicts, and random inputs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lab {

struct Tolerance {
  double rel_l2 = 1e-5;   // ||out - ref|| / ||ref||
  double max_abs = 1e-4;  // max |out - ref|
};

struct Metrics {
  double max_abs = 0;
  double max_rel = 0;  // |out - ref| / max(|ref|, 1e-6) at its worst element
  double rel_l2 = 0;
  size_t worst_index = 0;
  double worst_out = 0, worst_ref = 0;
  size_t count = 0;
  size_t non_finite = 0;  // NaN/Inf in the output where the reference is finite (includes unwritten)
};

struct OutputCheck {
  std::string output;  // e.g. "boxes", "O", "L"
  std::vector<size_t> shape;
  Metrics metrics;
  Tolerance tolerance;
  bool pass = false;
  // Kept for the viewer's diff heatmap; may be left empty by large problems.
  std::vector<float> out, ref;
};

Metrics compare_arrays(const float* out, const double* ref, size_t n);
// Builds an OutputCheck with the verdict: pass iff finite everywhere, rel_l2 and max_abs within tolerance.
OutputCheck make_check(std::string name, std::vector<size_t> shape, const std::vector<float>& out,
                       const std::vector<double>& ref, const Tolerance& tol, bool keep_arrays = true);

// Seeded uniform values in [lo, hi): never all zeros, reproducible across platforms.
std::vector<float> random_uniform(size_t n, float lo, float hi, uint64_t seed);
// Seeded bytes over 0..255 (random_uniform's stream scaled): images' pixels.
std::vector<unsigned char> random_bytes(size_t n, uint64_t seed);
// A deterministic 64-bit stream derived from a seed and a label, for independent inputs of one problem.
uint64_t derive_seed(uint64_t seed, const std::string& label);

}  // namespace lab
