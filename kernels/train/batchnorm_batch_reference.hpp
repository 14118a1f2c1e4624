// float64 reference of batch-statistics BatchNorm (BatchNorm2d in train mode, PyTorch's formulas), written
// as plain loops apart from the kernels (batchnorm_batch.cu): statistics, the forward, its backward and the
// running statistics' update. Tensors are [batch, channels, plane] row-major.
#pragma once
#include <cstddef>
#include <vector>

namespace lab {

struct BatchNormLayout {
  int batch = 0, channels = 0;
  long long plane = 0;
  size_t size() const { return size_t(batch) * size_t(channels) * size_t(plane); }
  size_t index(int b, int c, long long p) const { return (size_t(b) * channels + c) * size_t(plane) + p; }
  double count() const { return double(batch) * double(plane); }  // values per channel
};

// Per channel over (batch, plane): the mean and the biased variance (divided by the count).
struct BatchStatistics {
  std::vector<double> mean, var;
};
BatchStatistics batch_statistics_reference(const std::vector<double>& x, const BatchNormLayout& l);

// z = gamma (x - mean) / sqrt(var + eps) + beta; y = silu(z) = z / (1 + e^-z) when `silu`, else z.
std::vector<double> batchnorm_forward_reference(const std::vector<double>& x, const BatchNormLayout& l,
                                                const std::vector<double>& gamma,
                                                const std::vector<double>& beta, double eps, bool silu);

// Gradients of the loss through batchnorm_forward_reference, the statistics being functions of x:
// dz = dy silu'(z); d beta = sum dz; d gamma = sum dz xhat;
// dx = gamma / sqrt(var + eps) (dz - mean(dz) - xhat mean(dz xhat)), means over the channel's count.
struct BatchNormGradientsReference {
  std::vector<double> dx, d_gamma, d_beta;
};
BatchNormGradientsReference batchnorm_backward_reference(const std::vector<double>& x,
                                                         const std::vector<double>& dy,
                                                         const BatchNormLayout& l,
                                                         const std::vector<double>& gamma,
                                                         const std::vector<double>& beta, double eps,
                                                         bool silu);

// running = (1 - momentum) running + momentum batch, with the unbiased variance var * count / (count - 1)
// for running_var.
void running_statistics_update_reference(std::vector<double>& running_mean, std::vector<double>& running_var,
                                         const BatchStatistics& batch, double count, double momentum);

}  // namespace lab
