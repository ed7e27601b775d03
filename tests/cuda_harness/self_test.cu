// --self-test: the harness's CPU side checked on a machine without a GPU. The reference against
// an independent loop nest (96 channels and fewer), its relu rule on edge values, the 16-bit
// conversions against CUDA's, the layouts, and the judge shown to pass exact outputs and to fail
// every kind of wrong one (a perturbed, NaN, unwritten, sign-flipped or bias-less element, a
// transposed store, a guard byte, a one-bit rerun change; with relu: a value left negative, a
// -0.0, relu before the bias, a channel without relu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "plan.h"

using namespace alexconv::cuda;
using namespace harness;

namespace {

int self_test_failures = 0;
void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  self_test_failures += !ok;
}

// The reference by the definition, loop by loop, with none of reference()'s structure; the
// weight's rows are the output channels.
std::vector<double> naive(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* b,
                          int64_t n, int64_t h, int64_t wd, int64_t pad) {
  const int64_t oh = (h + 2 * pad - 11) / 4 + 1, ow = (wd + 2 * pad - 11) / 4 + 1, oc = int64_t(w.size()) / (3 * 11 * 11);
  std::vector<double> y(size_t(n * oc * oh * ow));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t c = 0; c < ow; ++c) {
          double s = 0;
          for (int64_t ci = 0; ci < 3; ++ci)
            for (int64_t ky = 0; ky < 11; ++ky)
              for (int64_t kx = 0; kx < 11; ++kx) {
                const int64_t yy = 4 * r + ky - pad, xx = 4 * c + kx - pad;
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                s += x[size_t(((i * 3 + ci) * h + yy) * wd + xx)] * w[size_t(((o * 3 + ci) * 11 + ky) * 11 + kx)];
              }
          y[size_t(((i * oc + o) * oh + r) * ow + c)] = s + (b ? (*b)[size_t(o)] : 0.0);
        }
  return y;
}

}  // namespace

int self_test() {
  // 1. The 16-bit conversions against CUDA's host conversions, edge values and random bits.
  {
    std::mt19937 rng(7);
    int64_t bad_h = 0, bad_b = 0, bad_dh = 0, bad_db = 0;
    std::vector<uint32_t> bits = {0u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x477fe000u, 0x477ff000u, 0x477fefffu,
                                  0x38800000u, 0x387fffffu, 0x33800000u, 0x33000000u, 0x33000001u, 0x7f7fffffu, 0x00000001u};
    for (int i = 0; i < 2000000; ++i) bits.push_back(rng());
    for (int i = 0; i < 500000; ++i) bits.push_back((rng() & 0x87ffffffu) | 0x30000000u);  // near fp16's range
    for (uint32_t u : bits) {
      const float f = harness::bits_float(u);
      if (f != f) continue;
      // CUDA's bit casts are device-only: memcpy between the types and their bits.
      const __half hv = __float2half_rn(f);
      const __nv_bfloat16 bv = __float2bfloat16_rn(f);
      uint16_t h, b;
      std::memcpy(&h, &hv, 2);
      std::memcpy(&b, &bv, 2);
      bad_h += harness::float_to_half(f) != h;
      bad_b += harness::float_to_bf16(f) != b;
      bad_dh += harness::half_to_double(h) != double(__half2float(hv));
      bad_db += harness::bf16_to_double(b) != double(__bfloat162float(bv));
    }
    expect(bad_h == 0 && bad_b == 0 && bad_dh == 0 && bad_db == 0,
           "fp16/bf16 conversions match cuda_fp16/cuda_bf16 on " + std::to_string(bits.size()) + " floats (mismatches " +
               std::to_string(bad_h + bad_b + bad_dh + bad_db) + ")");
    expect(std::isnan(harness::half_to_double(harness::float_to_half(std::nanf("")))) &&
               std::isnan(harness::bf16_to_double(harness::float_to_bf16(std::nanf("")))),
           "NaN stays NaN in 16 bits");
  }
  // 2. reference() against the naive loops, with and without bias, ragged small shapes, 96
  // channels and fewer, every padding (relu leaves the values alone: it acts in expected()).
  for (const Group& g : {Group{2, 15, 19, "nchw", "nchw", "nchw", 1}, Group{1, 7, 7, "nchw", "nchw", "nchw", 0},
                         Group{1, 30, 11, "nchw", "nchw", "nchw", 64}, Group{2, 15, 19, "nchw", "nchw", "nchw", 1, 8},
                         Group{1, 23, 27, "nchw", "nchw", "nchw", 0, 40, true}, Group{1, 19, 15, "nchw", "nchw", "nchw", 1, 88},
                         Group{1, 11, 13, "nchw", "nchw", "nchw", 1, 96, false, 0}, Group{2, 9, 14, "nchw", "nchw", "nchw", 1, 8, false, 1},
                         Group{1, 5, 3, "nchw", "nchw", "nchw", 1, 16, false, 4}, Group{1, 1, 2, "nchw", "nchw", "nchw", 0, 24, false, 5}}) {
    const HostData d = make_data(g, Mode::kFloat32, 11);
    const std::vector<double>* b = g.bias_scale != 0 ? &d.b : nullptr;
    const harness::Reference r = harness::reference(d.x, d.w, b, g.n, g.h, g.w, g.relu, g.pad);
    const std::vector<double> y = naive(d.x, d.w, b, g.n, g.h, g.w, g.pad);
    double worst = 0;
    bool mag_ok = true;
    for (size_t i = 0; i < y.size(); ++i) {
      worst = std::max(worst, std::fabs(y[i] - r.value[i]));
      mag_ok &= r.magnitude[i] >= std::fabs(r.value[i]) * (1 - 1e-12);  // |sum| <= sum of |terms|
    }
    char diff[32];
    std::snprintf(diff, sizeof diff, "%.3g", worst);
    expect(r.value.size() == size_t(g.n * g.channels * harness::out_size(g.h, g.pad) * harness::out_size(g.w, g.pad)) &&
               r.value.size() == y.size() && worst < 1e-12 && mag_ok,
           "reference == naive loops on " + describe(g) + " (max diff " + diff + ")");
  }
  // 2b. relu on the stored value, CUDA's rule: +0.0 (never -0.0) for every value that rounds to
  // <= 0 in the output dtype, the value itself above; NaN stays NaN; off, nothing changes.
  {
    const double tiny = 1e-9;  // below float16's smallest subnormal (6e-8): rounds to +0.0 there
    const std::vector<double> in = {-1.0, -tiny, -0.0, 0.0, tiny, 0.375, std::nan("")};
    const struct { Mode m; std::vector<double> want; } rules[] = {
        {Mode::kFloat32, {0, 0, 0, 0, tiny, 0.375, NAN}},  {Mode::kTf32, {0, 0, 0, 0, tiny, 0.375, NAN}},
        {Mode::kFloat16, {0, 0, 0, 0, 0, 0.375, NAN}},     {Mode::kBFloat16, {0, 0, 0, 0, tiny, 0.375, NAN}}};
    for (const auto& rule : rules) {
      harness::Reference on, off;
      on.value = off.value = in, on.relu = true;
      bool ok = true;
      for (size_t i = 0; i < in.size(); ++i) {
        const double got = harness::expected(rule.m, on, i), want = rule.want[i], kept = harness::expected(rule.m, off, i);
        ok &= std::isnan(want) ? std::isnan(got) : got == want && !std::signbit(got);
        ok &= std::memcmp(&kept, &in[i], 8) == 0;  // relu off: the value itself, bit for bit
      }
      expect(ok, std::string("relu rule in ") + harness::mode_name(rule.m) + ": -1 -1e-9 -0 +0 1e-9 0.375 NaN -> +0 +0 +0 +0 " +
                     (rule.m == Mode::kFloat16 ? "+0" : "1e-9") + " 0.375 NaN");
    }
  }
  // 3. Layouts: every logical element at its own offset inside the buffer, and back again.
  for (const char* kind : {"nchw", "nhwc", "wstride2"}) {
    const Layout l = harness::make_layout(kind, 2, 3, 5, 7);
    std::vector<int> hits(size_t(l.span), 0);
    bool inside = true;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t h = 0; h < 5; ++h)
          for (int64_t w = 0; w < 7; ++w) {
            const int64_t o = l.at(n, c, h, w);
            inside &= o >= 0 && o < l.span;
            if (o >= 0 && o < l.span) ++hits[size_t(o)];
          }
    bool once = inside;
    for (int v : hits) once &= v <= 1;
    std::vector<double> dense(size_t(l.numel()));
    for (size_t i = 0; i < dense.size(); ++i) dense[i] = double(i) - 17.0;
    std::vector<unsigned char> buf(size_t(l.span * 4), 0);
    harness::scatter(Mode::kFloat32, l, dense, buf);
    expect(once && harness::gather(Mode::kFloat32, l, buf.data()) == dense,
           std::string("layout ") + kind + ": one offset per element, scatter/gather round trip");
  }
  // 4. The judge: exact outputs pass, a tolerable error passes, and every kind of wrong output
  // fails, in every mode and output layout, through the same decode path the device run uses;
  // at 96 channels, and at 40 with relu.
  for (const Group& g : {Group{2, 35, 43, "nchw", "nchw", "nchw", 1}, Group{2, 35, 43, "nchw", "nchw", "nchw", 1, 40, true}}) {
    for (Mode m : kModes) {
      const Mode storage = storage_of(m);
      const HostData d = make_data(g, storage, 5);
      const harness::Reference r = harness::reference(d.x, d.w, &d.b, g.n, g.h, g.w, g.relu);
      const int64_t plane = harness::out_size(g.h) * harness::out_size(g.w);
      const auto channel_of = [&](size_t i) { return size_t(int64_t(i) / plane % g.channels); };
      const auto output_of = [&](const harness::Reference& ref) {  // what a kernel computing ref stores
        std::vector<double> o(ref.value.size());
        for (size_t i = 0; i < o.size(); ++i) o[i] = harness::expected(m, ref, i);
        return o;
      };
      const std::vector<double> want = output_of(r);
      int64_t big_bias = 0;  // the channel whose bias matters most
      for (int64_t c = 0; c < g.channels; ++c) if (std::fabs(d.b[size_t(c)]) > std::fabs(d.b[size_t(big_bias)])) big_bias = c;
      for (const char* kind : {"nchw", "nhwc"}) {
        const Layout l = harness::make_layout(kind, g.n, g.channels, harness::out_size(g.h), harness::out_size(g.w));
        const int eb = harness::mode_bytes(storage);
        const std::string tag = std::string(harness::mode_name(m)) + " " + kind + (g.relu ? " relu" : "") + " C" +
                                std::to_string(g.channels) + ": ";
        const auto verdict = [&](const std::vector<double>& values) {
          std::vector<unsigned char> buf(size_t(l.span * eb), 0xFF);
          harness::scatter(storage, l, values, buf);
          return harness::judge(m, harness::gather(storage, l, buf.data()), r);
        };
        size_t probe = r.value.size() / 2 + 3;  // with relu: one that relu keeps
        while (!(want[probe] > 0)) ++probe;
        const double bound = harness::element_bound(m, r.value[probe], r.magnitude[probe]);
        expect(verdict(want).pass, tag + "the reference rounded to the dtype passes");
        std::vector<double> v = want;
        // (16 bits: rounding the perturbed value could add up to u * |ref| on its own.)
        if (storage == Mode::kFloat32) {
          v[probe] += 0.25 * bound;
          expect(verdict(v).pass, tag + "an error of a quarter of the bound passes");
        }
        v = want;
        v[probe] += 4 * bound + 4 * std::fabs(r.value[probe]) * std::ldexp(1.0, eb == 2 ? -8 : -23);
        expect(!verdict(v).pass, tag + "one element past its bound fails");
        v = want;
        v[probe] = std::nan("");
        expect(!verdict(v).pass, tag + "one NaN element fails");
        // The last element (the judge's loop reaches the end) past its bound, and the largest
        // one negated (a sign error where |ref| stands well above every bound).
        v = want;
        const size_t last = v.size() - 1;
        v[last] += 4 * harness::element_bound(m, r.value[last], r.magnitude[last]) +
                   4 * std::fabs(r.value[last]) * std::ldexp(1.0, eb == 2 ? -8 : -23);
        expect(!verdict(v).pass, tag + "the last element past its bound fails");
        size_t largest = 0;
        for (size_t i = 0; i < v.size(); ++i) if (std::fabs(want[i]) > std::fabs(want[largest])) largest = i;
        v = want;
        v[largest] = -v[largest];
        expect(!verdict(v).pass, tag + "the largest element negated fails");
        harness::Reference unbiased = r;
        for (int64_t i = 0; i < plane; ++i) unbiased.value[size_t((1 * g.channels + big_bias) * plane + i)] -= d.b[size_t(big_bias)];
        expect(!verdict(output_of(unbiased)).pass, tag + "one channel of one image without its bias fails");
        if (g.relu) {
          expect(!verdict(r.value).pass, tag + "the output without relu fails");
          // The most negative value: relu stores +0.0 there, far from any bound.
          size_t lowest = 0;
          for (size_t i = 0; i < v.size(); ++i) if (r.value[i] < r.value[lowest]) lowest = i;
          v = want;
          v[lowest] = -0.0;
          expect(!verdict(v).pass, tag + "-0.0 for +0.0 (CPU torch's relu) fails");
          v[lowest] = 1e-6;
          expect(!verdict(v).pass, tag + "a small positive where the value is far below zero fails");
          // relu(conv) + bias: the epilogue's two steps swapped.
          for (size_t i = 0; i < v.size(); ++i) {
            const double b = d.b[channel_of(i)];
            v[i] = std::max(r.value[i] - b, 0.0) + b;
          }
          expect(!verdict(v).pass, tag + "relu before the bias fails");
          // The last channel stored without relu (a split fit's last group skipping it).
          v = want;
          for (size_t i = 0; i < v.size(); ++i) if (channel_of(i) == size_t(g.channels - 1)) v[i] = r.value[i];
          expect(!verdict(v).pass, tag + "the last channel without relu fails");
        }
        // An unwritten element: the poison (0xFF bytes) left in place.
        {
          std::vector<unsigned char> buf(size_t(l.span * eb), 0xFF);
          harness::scatter(storage, l, want, buf);
          std::memset(&buf[size_t(l.at(1, g.channels - 1, 3, 4) * eb)], 0xFF, size_t(eb));
          expect(!harness::judge(m, harness::gather(storage, l, buf.data()), r).pass, tag + "one unwritten element fails");
          // The right values in the other layout (a transposed store).
          const Layout other = harness::make_layout(std::string(kind) == "nchw" ? "nhwc" : "nchw", l.size[0], l.size[1],
                                                    l.size[2], l.size[3]);
          harness::scatter(storage, l, want, buf);
          expect(!harness::judge(m, harness::gather(storage, other, buf.data()), r).pass, tag + "the wrong layout fails");
        }
      }
    }
  }
  // 5. Guards and the determinism comparison notice one byte.
  {
    std::vector<unsigned char> a(3 * kGuard, 0xFF);
    expect(guards_intact(a, a.size()), "untouched guards pass");
    a[kGuard - 1] = 0;
    expect(!guards_intact(a, a.size()), "a byte written before the output is caught");
    a[kGuard - 1] = 0xFF, a[2 * kGuard] = 0x7F;
    expect(!guards_intact(a, a.size()), "a byte written after the output is caught");
    std::vector<unsigned char> b = a;
    b[kGuard + 5] ^= 1;
    expect(!(a == b), "a one-bit difference between runs is caught");
  }
  // 6. The plan: which fits each class gets (docs/architecture.md's dispatch table).
  {
    DeviceInfo h100;
    h100.sm_count = 132, h100.major = 9, h100.minor = 0, h100.max_smem_per_block_optin = kSmemHopper;
    const std::vector<DeviceClass> classes = device_classes(h100);
    const Group g2{3, 99, 131, "nchw", "nchw", "nchw", 1};
    const auto kernels = [&](Mode m, int cls) {
      std::string names;
      for (const Launch& L : plan_launches(planning_problem(g2, m), m, classes)) {
        if (L.cls == cls && L.family == Family::kIgemm) names += (names.empty() ? "" : " ") + L.kernel;
      }
      return names;
    };
    const std::string wg = wgmma_available(h100) ? "wgmma " : "";
    expect(classes.size() == 3, "an H100 plans as itself, 8.0 and 8.6");
    expect(kernels(Mode::kFloat32, 0) == wg + "mma_sync mma_sync_n48 mma_sync_n24", "H100 float32: " + kernels(Mode::kFloat32, 0));
    expect(kernels(Mode::kFloat16, 0) == wg + "mma_sync mma_sync_n48", "H100 float16: " + kernels(Mode::kFloat16, 0));
    expect(kernels(Mode::kTf32, 1) == "mma_sync_n48 mma_sync_n24", "as-8.0 tf32: " + kernels(Mode::kTf32, 1));
    expect(kernels(Mode::kBFloat16, 1) == "mma_sync mma_sync_n48", "as-8.0 bfloat16: " + kernels(Mode::kBFloat16, 1));
    expect(kernels(Mode::kFloat32, 2) == "mma_sync_n24", "as-8.6 float32: " + kernels(Mode::kFloat32, 2));
    expect(kernels(Mode::kFloat16, 2) == "mma_sync_n48", "as-8.6 float16: " + kernels(Mode::kFloat16, 2));
    // TF32 fits the 99 KB parts over two CTAs as float16 words (mma::Float32AsHalf), over four as TF32.
    expect(kernels(Mode::kTf32, 2) == "mma_sync_n48 mma_sync_n24", "as-8.6 tf32: " + kernels(Mode::kTf32, 2));
    // The portable space-to-depth kernel: every weight in one CTA where 163 KB allow it, two groups
    // of 48 channels in 99 KB; float32 accurate (bf16x3, twice the bytes) in two groups on the
    // A100 class and Hopper, three of 32 in 99 KB.
    const auto portable = [&](Mode m, int cls) {
      for (const Launch& L : plan_launches(planning_problem(g2, m), m, classes)) {
        if (L.cls == cls && L.family == Family::kS2dMmaSync) return L.fit_name;
      }
      return std::string("-");
    };
    expect(portable(Mode::kFloat16, 0) == "Whole" && portable(Mode::kTf32, 1) == "Whole",
           "s2d_mma_sync on H100 and as-8.0: " + portable(Mode::kFloat16, 0) + " " + portable(Mode::kTf32, 1));
    expect(portable(Mode::kBFloat16, 2) == "Halves" && portable(Mode::kTf32, 2) == "Halves",
           "s2d_mma_sync as-8.6: " + portable(Mode::kBFloat16, 2) + " " + portable(Mode::kTf32, 2));
    expect(portable(Mode::kFloat32, 0) == "Halves" && portable(Mode::kFloat32, 1) == "Halves" &&
               portable(Mode::kFloat32, 2) == "Thirds",
           "s2d_mma_sync bf16x3: " + portable(Mode::kFloat32, 0) + " " + portable(Mode::kFloat32, 1) + " " +
               portable(Mode::kFloat32, 2));
    // The kernels see the group's channels (weight rows, Problem::out_channels) and relu; 8
    // channels_last channels (a 16-bit pixel: one 16-byte unit) still take the pixel-major store.
    const Group g8{2, 35, 43, "nchw", "nhwc", "nhwc", 1, 8, true};
    for (Mode m : kModes) {
      const Problem p = planning_problem(g8, m);
      expect(p.out_channels == 8 && p.relu && p.out_pixel_major && layouts_of(g8).weight.size[0] == 8 &&
                 p.weight_stride[0] == 363 && p.out_stride[0] == 8 * harness::out_size(35) * harness::out_size(43),
             std::string("the problem of ") + describe(g8) + " in " + harness::mode_name(m));
    }
  }
  std::printf("self-test: %d failed\n", self_test_failures);
  return self_test_failures == 0 ? 0 : 1;
}
