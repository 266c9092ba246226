// Fft: the discrete Fourier transform of one complex vector, a radix-2 FFT
// when the length is a power of two and a direct O(n^2) sum otherwise.
#include <cmath>
#include <numbers>
#include <utility>

#include "tessera/onnx/ops/misc/misc_kernels.h"

namespace tessera::onnx {

void Fft(std::vector<std::complex<double>>& x, bool inverse) {
  const size_t n = x.size();
  if (n <= 1) return;
  const double sign = inverse ? 1.0 : -1.0;
  // Twiddles w^k = e^{sign 2 pi i k / n}, exact per index (no accumulated error).
  std::vector<std::complex<double>> w(n);
  for (size_t k = 0; k < n; ++k) {
    const double ang = sign * 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
    w[k] = {std::cos(ang), std::sin(ang)};
  }
  if ((n & (n - 1)) == 0) {
    for (size_t i = 1, j = 0; i < n; ++i) {  // bit reversal
      size_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(x[i], x[j]);
    }
    for (size_t len = 2; len <= n; len <<= 1) {
      const size_t step = n / len;
      for (size_t i = 0; i < n; i += len) {
        for (size_t k = 0; k < len / 2; ++k) {
          const std::complex<double> u = x[i + k], v = x[i + k + len / 2] * w[k * step];
          x[i + k] = u + v;
          x[i + k + len / 2] = u - v;
        }
      }
    }
  } else {
    std::vector<std::complex<double>> y(n);
    for (size_t k = 0; k < n; ++k) {
      std::complex<double> acc = 0;
      for (size_t j = 0; j < n; ++j) acc += x[j] * w[(j * k) % n];
      y[k] = acc;
    }
    x = std::move(y);
  }
  if (inverse) {
    for (auto& v : x) v /= static_cast<double>(n);
  }
}

}  // namespace tessera::onnx
