// The harness's CPU side: 16-bit conversions, strided layouts, the float64 reference and the
// numerical contract. Plain C++ (no CUDA, no torch), so --self-test can check all of it on a
// machine without a GPU, and so none of it shares code with the kernels it judges.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace harness {

// ---- 16-bit conversions (round to nearest even), written out rather than taken from
// cuda_fp16.h: the self-test compares them with CUDA's host conversions.
inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline uint16_t float_to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to Inf
  if (abs < 0x38800000u) {                                  // below 2^-14: subnormal (or 0)
    // |f| * 2^24 is exact in double; nearbyint rounds half to even. 1024 is 2^-14's bits.
    return uint16_t(sign | uint16_t(std::nearbyint(double(bits_float(abs)) * 16777216.0)));
  }
  const uint32_t mant = abs & 0x7fffffu;
  uint32_t h = ((((abs >> 23) - 127 + 15) << 10) | (mant >> 13));
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
  return uint16_t(sign | h);
}

inline double half_to_double(uint16_t h) {
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(double(man), -24);
  if (exp == 31) return man ? std::nan("") : sign * INFINITY;
  return sign * std::ldexp(double(1024 + man), exp - 25);
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline double bf16_to_double(uint16_t b) { return double(bits_float(uint32_t(b) << 16)); }

// ---- The modes and their contract (tests/conftest.py, assert_matches_reference).
enum class Mode { kFloat32, kTf32, kFloat16, kBFloat16 };
inline const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kFloat32: return "float32";
    case Mode::kTf32: return "float32+tf32";
    case Mode::kFloat16: return "float16";
    case Mode::kBFloat16: return "bfloat16";
  }
  return "?";
}
inline int mode_bytes(Mode m) { return m == Mode::kFloat16 || m == Mode::kBFloat16 ? 2 : 4; }

// A value as the mode stores it: float32 modes keep the float, 16-bit ones round.
inline double round_to_mode(Mode m, float v) {
  switch (m) {
    case Mode::kFloat16: return half_to_double(float_to_half(v));
    case Mode::kBFloat16: return bf16_to_double(float_to_bf16(v));
    default: return double(v);
  }
}
inline void encode(Mode m, double v, unsigned char* dst) {
  if (mode_bytes(m) == 4) {
    const float f = float(v);
    std::memcpy(dst, &f, 4);
  } else {
    const uint16_t b = m == Mode::kFloat16 ? float_to_half(float(v)) : float_to_bf16(float(v));
    std::memcpy(dst, &b, 2);
  }
}
inline double decode(Mode m, const unsigned char* src) {
  if (mode_bytes(m) == 4) {
    float f;
    std::memcpy(&f, src, 4);
    return double(f);
  }
  uint16_t b;
  std::memcpy(&b, src, 2);
  return m == Mode::kFloat16 ? half_to_double(b) : bf16_to_double(b);
}

// ---- Strided 4-d layouts: logical (N, C, H, W) index -> element offset in a buffer.
struct Layout {
  int64_t size[4] = {};
  int64_t stride[4] = {};
  int64_t offset = 0;  // elements before element (0, 0, 0, 0)
  int64_t span = 0;    // elements the buffer holds
  int64_t at(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return offset + n * stride[0] + c * stride[1] + h * stride[2] + w * stride[3];
  }
  int64_t numel() const { return size[0] * size[1] * size[2] * size[3]; }
};
// "nchw": contiguous; "nhwc": channels_last; "wstride2": every other column of an image
// 2W+1 wide, from column 1 (tests/conftest.py's "sliced": no unit stride, odd offset).
inline Layout make_layout(const std::string& kind, int64_t n, int64_t c, int64_t h, int64_t w) {
  Layout l;
  l.size[0] = n, l.size[1] = c, l.size[2] = h, l.size[3] = w;
  if (kind == "nhwc") {
    l.stride[0] = c * h * w, l.stride[1] = 1, l.stride[2] = w * c, l.stride[3] = c;
    l.span = n * c * h * w;
  } else if (kind == "wstride2") {
    const int64_t pitch = 2 * w + 1;
    l.stride[0] = c * h * pitch, l.stride[1] = h * pitch, l.stride[2] = pitch, l.stride[3] = 2;
    l.offset = 1;
    l.span = n * c * h * pitch;
  } else {  // nchw
    l.stride[0] = c * h * w, l.stride[1] = h * w, l.stride[2] = w, l.stride[3] = 1;
    l.span = n * c * h * w;
  }
  return l;
}

// Logical dense NCHW values -> a buffer in `l` (elements outside the view keep `fill`'s bytes).
inline void scatter(Mode m, const Layout& l, const std::vector<double>& dense, std::vector<unsigned char>& buf) {
  const int eb = mode_bytes(m);
  int64_t i = 0;
  for (int64_t n = 0; n < l.size[0]; ++n)
    for (int64_t c = 0; c < l.size[1]; ++c)
      for (int64_t h = 0; h < l.size[2]; ++h)
        for (int64_t w = 0; w < l.size[3]; ++w) encode(m, dense[i++], &buf[size_t(l.at(n, c, h, w) * eb)]);
}
inline std::vector<double> gather(Mode m, const Layout& l, const unsigned char* buf) {
  const int eb = mode_bytes(m);
  std::vector<double> dense(size_t(l.numel()));
  int64_t i = 0;
  for (int64_t n = 0; n < l.size[0]; ++n)
    for (int64_t c = 0; c < l.size[1]; ++c)
      for (int64_t h = 0; h < l.size[2]; ++h)
        for (int64_t w = 0; w < l.size[3]; ++w) dense[size_t(i++)] = decode(m, buf + l.at(n, c, h, w) * eb);
  return dense;
}

// ---- The float64 reference, F.conv2d(x, w, b, stride=4, padding=pad) on dense NCHW values, and
// its magnitude sum |x|*|w| + |b| (the scale of a rounded path's error), per output element.
// The output channels are the weight's: w.size() / 363.
constexpr int64_t kC = 3, kK = 11, kS = 4, kP = 2, kTaps = kC * kK * kK;
inline int64_t out_size(int64_t in, int64_t pad = kP) { return (in + 2 * pad - kK) / kS + 1; }

struct Reference {
  std::vector<double> value, magnitude;  // dense [n][channels][oh][ow], the convolution before relu
  bool relu = false;                     // the output holds expected(), not value
};

// What output element i should hold in mode m. With relu fused (Problem::relu), torch.relu of the
// stored value as CUDA torch computes it (relu_output, op/cuda/common/dtype.cuh): +0.0 wherever
// the value rounded to the output dtype is <= 0 (-0.0 included; a positive value too small for
// the dtype rounds to +0.0), else the float64 value, whose rounding the bound covers as without
// relu. NaN stays NaN (the comparison is false).
inline double expected(Mode m, const Reference& r, size_t i) {
  return r.relu && round_to_mode(m, float(r.value[i])) <= 0 ? 0.0 : r.value[i];
}

// Each output pixel gathers its 363 taps (zeros in the padding) once, then takes one dot
// product per channel: 363 MACs per output, threads over rows of output pixels.
inline Reference reference(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* b,
                           int64_t n, int64_t h, int64_t wd, bool relu, int64_t pad = kP) {
  const int64_t oh = out_size(h, pad), ow = out_size(wd, pad), channels = int64_t(w.size()) / kTaps;
  Reference r;
  r.relu = relu;
  r.value.assign(size_t(n * channels * oh * ow), 0.0);
  r.magnitude.assign(r.value.size(), 0.0);
  std::vector<double> wabs(w.size());
  for (size_t i = 0; i < w.size(); ++i) wabs[i] = std::fabs(w[i]);
  const auto rows = [&](int64_t first, int64_t step) {
    std::vector<double> patch(kTaps), pabs(kTaps);
    for (int64_t row = first; row < n * oh; row += step) {
      const int64_t in = row / oh, oy = row % oh;
      for (int64_t ox = 0; ox < ow; ++ox) {
        for (int64_t c = 0, k = 0; c < kC; ++c)
          for (int64_t ky = 0; ky < kK; ++ky)
            for (int64_t kx = 0; kx < kK; ++kx, ++k) {
              const int64_t iy = oy * kS - pad + ky, ix = ox * kS - pad + kx;
              const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < wd;
              patch[k] = inside ? x[size_t(((in * kC + c) * h + iy) * wd + ix)] : 0.0;
              pabs[k] = std::fabs(patch[k]);
            }
        for (int64_t co = 0; co < channels; ++co) {
          const double* wr = &w[size_t(co * kTaps)];
          const double* ar = &wabs[size_t(co * kTaps)];
          double s = b ? (*b)[size_t(co)] : 0.0, m = b ? std::fabs((*b)[size_t(co)]) : 0.0;
          for (int64_t k = 0; k < kTaps; ++k) s += patch[k] * wr[k], m += pabs[k] * ar[k];
          const size_t o = size_t(((in * channels + co) * oh + oy) * ow + ox);
          r.value[o] = s;
          r.magnitude[o] = m;
        }
      }
    }
  };
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), n * oh));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(rows, t, threads);
  rows(0, threads);
  for (std::thread& t : pool) t.join();
  return r;
}

// ---- The contract (tests/conftest.py): float32 allclose(1e-4, 1e-4) against float64; the
// rounded paths a relative norm error (TF32 1e-3, float16 2e-3, bfloat16 1e-2) and per element
// |out - ref| <= u * |ref| + c * magnitude + tiny * eps. NaN anywhere fails. With relu, ref is
// expected() and the bound the convolution's (judge).
struct Bound {
  double u, c, floor;
};
inline Bound rounded_bound(Mode m) {
  switch (m) {
    case Mode::kTf32: return {std::ldexp(1.0, -24), 2 * std::ldexp(1.0, -11) + 3e-5, 1.17549435e-38 * std::ldexp(1.0, -23)};
    case Mode::kFloat16: return {std::ldexp(1.0, -11), 3e-5, 6.103515625e-05 * std::ldexp(1.0, -10)};
    case Mode::kBFloat16: return {std::ldexp(1.0, -8), 3e-5, 1.17549435e-38 * std::ldexp(1.0, -7)};
    default: return {0, 0, 0};
  }
}
inline double rel_norm_limit(Mode m) {
  return m == Mode::kTf32 ? 1e-3 : m == Mode::kFloat16 ? 2e-3 : m == Mode::kBFloat16 ? 1e-2 : 0.0;
}
// The largest error element i may have.
inline double element_bound(Mode m, double ref, double magnitude) {
  if (m == Mode::kFloat32) return 1e-4 + 1e-4 * std::fabs(ref);
  const Bound b = rounded_bound(m);
  return b.u * std::fabs(ref) + b.c * magnitude + b.floor;
}

struct Verdict {
  bool pass = true;
  double max_err = 0, rel_err = 0;
  int64_t nan = 0, over = 0;  // NaN elements, elements past their bound
  int64_t relu_broken = 0;    // with relu: elements that break its rule (judge)
  int64_t worst = -1;         // dense index of the element furthest past its bound
  std::string why;
};

// Every element against expected() within the bound of the convolution's value (relu moves no
// value further from the reference: |relu(a) - relu(b)| <= |a - b|). With relu, its rule exactly
// too: nothing stored below zero or as -0.0, and +0.0 wherever the value is below zero by more
// than its bound (there the kernel's own value was negative as well).
inline Verdict judge(Mode m, const std::vector<double>& out, const Reference& ref) {
  Verdict v;
  if (out.size() != ref.value.size()) {
    v.pass = false, v.why = "size mismatch";
    return v;
  }
  double diff2 = 0, ref2 = 0, worst_excess = -INFINITY;
  int64_t first_relu = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    const double r = expected(m, ref, i), e = std::fabs(out[i] - r);
    const double bound = element_bound(m, ref.value[i], ref.magnitude[i]);
    ref2 += r * r;
    if (std::isnan(out[i])) {  // e is NaN too: counted here, never compared
      ++v.nan;
      continue;
    }
    if (ref.relu && (std::signbit(out[i]) || (ref.value[i] < -bound && out[i] != 0))) {
      if (v.relu_broken++ == 0) first_relu = int64_t(i);
    }
    diff2 += e * e;
    v.max_err = std::max(v.max_err, e);  // Inf stays Inf
    const double excess = e - bound;
    if (!(excess <= 0)) ++v.over;
    if (excess > worst_excess) worst_excess = excess, v.worst = int64_t(i);
  }
  v.rel_err = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  char buf[256];
  if (v.nan > 0) {
    v.pass = false;
    std::snprintf(buf, sizeof buf, "%lld NaN elements (unwritten or wrong); ", (long long)v.nan);
    v.why += buf;
  }
  if (v.over > 0) {
    v.pass = false;
    const size_t w = size_t(v.worst);
    std::snprintf(buf, sizeof buf, "%lld elements past the per-element bound, worst #%lld: out %.9g ref %.9g bound %.3g; ",
                  (long long)v.over, (long long)v.worst, out[w], expected(m, ref, w),
                  element_bound(m, ref.value[w], ref.magnitude[w]));
    v.why += buf;
  }
  if (v.relu_broken > 0) {
    v.pass = false;
    const size_t f = size_t(first_relu);
    std::snprintf(buf, sizeof buf, "%lld elements break relu (below zero, -0.0, or not +0.0 where the value is "
                  "below -bound), first #%lld: out %.9g value %.9g; ", (long long)v.relu_broken, (long long)f, out[f],
                  ref.value[f]);
    v.why += buf;
  }
  if (m != Mode::kFloat32 && !(v.rel_err <= rel_norm_limit(m))) {
    v.pass = false;
    std::snprintf(buf, sizeof buf, "relative norm error %.3g > %.3g; ", v.rel_err, rel_norm_limit(m));
    v.why += buf;
  }
  return v;
}

}  // namespace harness
