// Reference causal attention: materializes one row of scores at a time,
// scalar loops with double accumulators. The oracle for the flash kernels.
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/ops/attention/attention_internal.h"

namespace tessera::ops::attention_internal {

void ReferenceForward(const Tensor& q_t, const Tensor& k_t, const Tensor& v_t, float scale, const Dims& d,
                      Tensor& out_t, Tensor& lse_t) {
  DispatchFloating(q_t.dtype(), [&]<typename T>() {
    const T* q = q_t.data<T>();
    const T* k = k_t.data<T>();
    const T* v = v_t.data<T>();
    T* out = out_t.data<T>();
    float* lse = lse_t.data<float>();
    std::vector<double> s(d.t), o(d.dh);
    for (int64_t b = 0; b < d.bh; ++b) {
      const int64_t base = b * d.t * d.dh;
      for (int64_t i = 0; i < d.t; ++i) {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d.dh; ++c) {
            dot += static_cast<double>(ToF32(q[base + i * d.dh + c])) * ToF32(k[base + j * d.dh + c]);
          }
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        double l = 0;
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = 0; j <= i; ++j) {
          double p = std::exp(s[j] - m);
          l += p;
          for (int64_t c = 0; c < d.dh; ++c) o[c] += p * ToF32(v[base + j * d.dh + c]);
        }
        for (int64_t c = 0; c < d.dh; ++c) out[base + i * d.dh + c] = FromF32<T>(static_cast<float>(o[c] / l));
        lse[b * d.t + i] = static_cast<float>(m + std::log(l));
      }
    }
  });
}

void ReferenceBackward(const Tensor& dout_t, const Tensor& q_t, const Tensor& k_t, const Tensor& v_t,
                       const Tensor& out_t, const Tensor& lse_t, float scale, const Dims& d, Tensor& dq_t,
                       Tensor& dk_t, Tensor& dv_t) {
  DispatchFloating(q_t.dtype(), [&]<typename T>() {
    const T* q = q_t.data<T>();
    const T* k = k_t.data<T>();
    const T* v = v_t.data<T>();
    const float* lse = lse_t.data<float>();
    const int64_t n = d.t * d.dh;
    std::vector<double> dq(n), dk(n), dv(n), p(d.t), ds(d.t);
    DispatchFloating(dout_t.dtype(), [&]<typename G>() {
      const G* go = dout_t.data<G>();
      DispatchFloating(out_t.dtype(), [&]<typename O>() {
        const O* out = out_t.data<O>();
        for (int64_t b = 0; b < d.bh; ++b) {
          const int64_t base = b * n;
          std::fill(dq.begin(), dq.end(), 0.0);
          std::fill(dk.begin(), dk.end(), 0.0);
          std::fill(dv.begin(), dv.end(), 0.0);
          for (int64_t i = 0; i < d.t; ++i) {
            const double l = lse[b * d.t + i];
            double di = 0;  // D_i = dO_i · O_i
            for (int64_t c = 0; c < d.dh; ++c) {
              di += static_cast<double>(ToF32(go[base + i * d.dh + c])) * ToF32(out[base + i * d.dh + c]);
            }
            for (int64_t j = 0; j <= i; ++j) {
              double dot = 0, dp = 0;
              for (int64_t c = 0; c < d.dh; ++c) {
                dot += static_cast<double>(ToF32(q[base + i * d.dh + c])) * ToF32(k[base + j * d.dh + c]);
                dp += static_cast<double>(ToF32(go[base + i * d.dh + c])) * ToF32(v[base + j * d.dh + c]);
              }
              p[j] = std::exp(dot * scale - l);
              ds[j] = p[j] * (dp - di);
            }
            for (int64_t j = 0; j <= i; ++j) {
              for (int64_t c = 0; c < d.dh; ++c) {
                dv[j * d.dh + c] += p[j] * ToF32(go[base + i * d.dh + c]);
                dq[i * d.dh + c] += scale * ds[j] * ToF32(k[base + j * d.dh + c]);
                dk[j * d.dh + c] += scale * ds[j] * ToF32(q[base + i * d.dh + c]);
              }
            }
          }
          T* gq = dq_t.data<T>() + base;
          T* gk = dk_t.data<T>() + base;
          T* gv = dv_t.data<T>() + base;
          for (int64_t e = 0; e < n; ++e) {
            gq[e] = FromF32<T>(static_cast<float>(dq[e]));
            gk[e] = FromF32<T>(static_cast<float>(dk[e]));
            gv[e] = FromF32<T>(static_cast<float>(dv[e]));
          }
        }
      });
    });
  });
}

}  // namespace tessera::ops::attention_internal
