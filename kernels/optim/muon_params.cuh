// Parameters of the Newton-Schulz kernels of Muon (muon_newton_schulz.cu): plain data, passed by value.
#pragma once

namespace lab {

constexpr int kMuonTile = 16;  // the gemm's square tile (block = kMuonTile x kMuonTile threads)

// C = alpha * A B + beta * D over an m x n result with inner size k; every operand through its own strides
// (element (i, j) of X at x[i * x_row + j * x_col]), so a transposed read or write costs nothing.
struct MuonGemmParams {
  const float* a;  // (m, k)
  long long a_row, a_col;
  const float* b;  // (k, n)
  long long b_row, b_col;
  const float* d;  // (m, n), read only when beta != 0
  long long d_row, d_col;
  float* c;  // (m, n)
  long long c_row, c_col;
  int m, n, k;
  float alpha, beta;
};

// x = g / (||g||_F + eps), written [short, long] row-major: g [rows, cols] transposed when rows > cols.
struct MuonNormalizeParams {
  const float* g;  // [rows, cols] row-major
  float* x;        // [min(rows, cols), max(rows, cols)]
  int rows, cols;
  float eps;
};

}  // namespace lab
