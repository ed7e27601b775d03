// Tensor-core fragments for the implicit GEMM: out[pixel][channel] += A[pixel][k] * B[k][channel].
//
// Each input channel contributes 121 taps, padded to 128 = 8 steps of 16. A step
// hands every thread 4 tap columns ("cols") of A for its two pixel rows (g, g+8),
// and one 16-byte chunk of B per chunk index, pre-packed in fragment order.
// A mode says how those become mma.sync instructions (and, for the wgmma engine,
// how B is laid out in core matrices and which warpgroup MMAs consume it):
//   Bf16x3 - float32-accurate: x = hi + lo with hi, lo bf16; x*w ~ hi*hi + hi*lo + lo*hi.
//   Tf32   - allow_tf32: two m16n8k8 TF32 MMAs per step.
//   Half<> - float16 / bfloat16 inputs: one m16n8k16 MMA, float32 accumulation.
//   Float32AsHalf - allow_tf32 as float16 words: float32 rounded to float16, Half's MMAs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../arch/mma_sync.cuh"
#include "../arch/wgmma.cuh"
#include "launch_terms.h"  // OperandMode

namespace alexconv {
namespace cuda {
namespace mma {

constexpr int kNTiles = 12;  // 96 output channels / n8

__device__ __forceinline__ uint32_t pack_u16(uint16_t lo, uint16_t hi) {
  return uint32_t(lo) | (uint32_t(hi) << 16);
}

// Two floats rounded to nearest float16, packed (lo in the low half).
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// The low part of x = hi + lo. Where it would be 0 (x exact in bf16) or NaN
// (x infinite), use the smallest normal of x's sign instead: a hi*lo product of
// 0 * inf would turn an infinite result into NaN, which F.conv2d does not do.
// The substitute changes a finite result by at most 2^-126 * |other operand|.
__device__ __forceinline__ float split_low(float x, float hi) {
  const float lo = x - hi;
  // Selects, not branches: this runs once per staged element.
  const float low = (lo == 0.f || !(fabsf(hi) < INFINITY)) ? copysignf(0x1p-126f, x) : lo;
  return x == 0.f ? 0.f : low;
}

// How a split picks its high part. Inputs round to nearest (the smallest residual).
// Weights round toward zero, so lo(w) never has the opposite sign of hi(w): for an
// infinite input, hi(x)*hi(w) and hi(x)*lo(w) are then infinities of one sign and
// the sum is the +-inf F.conv2d gives, not inf - inf = NaN. (It costs about one bit
// on the hi*lo term: relative error 4e-6 -> 7e-6 on KernelBench inputs, emulated.)
// An infinite weight needs the same of the inputs' low parts, so a launch whose
// weights hold one splits its inputs toward zero as well.
enum class Round { kNearest, kTowardZero };

__device__ __forceinline__ float bf16_toward_zero(float x) {
  // Dropping the low 16 bits could turn a NaN into an infinity: keep NaN a NaN.
  return isnan(x) ? __uint_as_float(0x7fc00000u)
                  : __uint_as_float(__float_as_uint(x) & 0xffff0000u);
}

// The two values of a bf16x2 word as floats (element 0 in the low half).
__device__ __forceinline__ float bf16_low_half(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float bf16_high_half(uint32_t word) { return __uint_as_float(word & 0xffff0000u); }

// bf16's largest finite value. A finite float32 past it (the top 0.2% of float32's range)
// would round to an infinite hi part and a product of Inf where F.conv2d's is finite.
constexpr float kBf16Max = 0x1.fep127f;

// Splits two floats into packed bf16x2 high and low parts (element 0 in the low half).
// To nearest, hi is x clamped to bf16's finite range and rounded, lo = x - hi (exact),
// rounded: a finite x keeps a finite hi, an infinite one a finite hi and an infinite lo of
// its sign (not inf - inf = NaN), and NaN a NaN lo. Such a launch has no infinite weight
// (see Round), so lo(x) * hi(w) is then the +-inf or NaN F.conv2d gives.
__device__ __forceinline__ void split_bf16x2(float x0, float x1, uint32_t& hi, uint32_t& lo,
                                             Round round) {
  __nv_bfloat162 l;
  if (round == Round::kNearest) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(fminf(fmaxf(x0, -kBf16Max), kBf16Max),
                                                   fminf(fmaxf(x1, -kBf16Max), kBf16Max));
    hi = *reinterpret_cast<const uint32_t*>(&h);
    l = __floats2bfloat162_rn(x0 - bf16_low_half(hi), x1 - bf16_high_half(hi));
  } else {
    const float2 hf = make_float2(bf16_toward_zero(x0), bf16_toward_zero(x1));
    hi = (__float_as_uint(hf.x) >> 16) | (__float_as_uint(hf.y) & 0xffff0000u);
    l = __floats2bfloat162_rn(split_low(x0, hf.x), split_low(x1, hf.y));
  }
  lo = *reinterpret_cast<const uint32_t*>(&l);
}

// x[row][j]: the thread's A values for pixel rows (g, g+8) and its 4 cols.
// Column j of an m16n8k16 step is 2t, 2t+1, 2t+8, 2t+9.
__device__ __forceinline__ int col_k16(int t, int j) { return 2 * t + (j & 1) + (j >> 1) * 8; }

// The K order: which tap (ky * 11 + kx; 121 and up: padding) each of a channel's
// 128 k indices multiplies. A thread's cols j = 0, 1 and j = 2, 3 of a step are
// pairs (each mode maps col -> pair slot and member). Pairs 0..54 are the
// neighbouring taps (ky, kx), (ky, kx + 1) with kx even: every pixel's window
// column is even (stride 4 and an even padding, the only ones plan_igemm takes), so
// such a pair is one aligned 4-byte (16-bit words) or 8-byte (32-bit words) load
// from the window. Pairs 56..61 hold the 11 taps of column kx = 10 and are loaded
// tap by tap; 55, 62 and 63 pad.
constexpr int kTapsPerChannel = 121;
constexpr int kAdjacentPairs = 55;  // 11 rows x 5
constexpr int kPairedSteps = 7;     // steps 0..6 (pairs 0..55) load pairs; step 7 taps
__host__ __device__ constexpr int paired_tap(int pair, int member) {
  if (pair < kAdjacentPairs) return (pair / 5) * 11 + 2 * (pair % 5) + member;
  const int odd = 2 * (pair - kAdjacentPairs - 1) + member;
  return pair > kAdjacentPairs && odd < 11 ? odd * 11 + 10 : kTapsPerChannel;
}
// Every tap exactly once, padding only past the adjacent pairs.
constexpr bool k_order_is_complete() {
  int seen[kTapsPerChannel] = {};
  for (int k = 0; k < 128; ++k) {
    const int tap = paired_tap(k / 2, k % 2);
    if (tap > kTapsPerChannel || (tap == kTapsPerChannel && k / 2 < kAdjacentPairs)) return false;
    if (tap < kTapsPerChannel && seen[tap]++) return false;
  }
  for (int tap = 0; tap < kTapsPerChannel; ++tap) {
    if (!seen[tap]) return false;
  }
  return kPairedSteps * 8 == kAdjacentPairs + 1;
}
static_assert(k_order_is_complete(), "the K order covers each tap once");
// Pair slot (0..7) and member of k16 col c: (2i, 2i + 1) are pair i.
__device__ __forceinline__ int k16_pair(int c) { return c >> 1; }
__device__ __forceinline__ int k16_member(int c) { return c & 1; }

// Window words hold one input element each, already in the MMA's operand format,
// converted once when the window is staged rather than at every fragment load.
struct Bf16x3 {
  using Raw = float;
  using Word = uint32_t;  // bf16 hi in the low half, bf16 lo in the high half
  // One n-tile (8 output channels) per chunk: {hi.b0, hi.b1, lo.b0, lo.b1}.
  template <int kNT>
  static constexpr int kChunksOf = kNT;
  static constexpr int kChunks = kChunksOf<kNTiles>;
  struct A {
    uint32_t hi[4], lo[4];
  };
  __device__ static int col(int t, int j) { return col_k16(t, j); }
  __device__ static int pair(int c) { return k16_pair(c); }
  __device__ static int member(int c) { return k16_member(c); }
  // Four consecutive elements (a 16-byte unit of the window) to their words.
  __device__ static uint4 to_words4(uint4 v, Round round) {
    uint32_t hi01, lo01, hi23, lo23;
    split_bf16x2(__uint_as_float(v.x), __uint_as_float(v.y), hi01, lo01, round);
    split_bf16x2(__uint_as_float(v.z), __uint_as_float(v.w), hi23, lo23, round);
    return make_uint4(__byte_perm(hi01, lo01, 0x5410), __byte_perm(hi01, lo01, 0x7632),
                      __byte_perm(hi23, lo23, 0x5410), __byte_perm(hi23, lo23, 0x7632));
  }
  __device__ static void make_a(A& a, const Word (&x)[2][4]) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const Word w0 = x[r & 1][(r >> 1) * 2], w1 = x[r & 1][(r >> 1) * 2 + 1];
      a.hi[r] = __byte_perm(w0, w1, 0x5410);
      a.lo[r] = __byte_perm(w0, w1, 0x7632);
    }
  }
  template <int kNT>
  __device__ static void mma(float (&acc)[kNT][4], int chunk, const A& a, uint4 b) {
    // Small terms first; all three land in one float32 accumulator.
    bf16_16816(acc[chunk], a.lo, b.x, b.y);
    bf16_16816(acc[chunk], a.hi, b.z, b.w);
    bf16_16816(acc[chunk], a.hi, b.x, b.y);
  }
  // w(n, col) reads weight tap `col` of this step for output channel n (0 past the 121st tap).
  template <class W>
  __device__ static uint4 pack_b(const W& w, int chunk, int g, int t) {
    const int n = chunk * 8 + g;
    uint4 b;
    split_bf16x2(w(n, col(t, 0)), w(n, col(t, 1)), b.x, b.z, Round::kTowardZero);
    split_bf16x2(w(n, col(t, 2)), w(n, col(t, 3)), b.y, b.w, Round::kTowardZero);
    return b;
  }
  // wgmma: block 0 holds hi(w), block 1 lo(w), 16 taps each. One 4-byte word of
  // a block row holds taps 2u, 2u + 1; one split gives both blocks' words.
  static constexpr int kWgBlocks = 2;
  template <class W>
  __device__ static void wg_words(const W& w, int n, int unit, uint32_t (&words)[kWgBlocks]) {
    split_bf16x2(w(n, 2 * unit), w(n, 2 * unit + 1), words[0], words[1], Round::kTowardZero);
  }
  __device__ static void wg_mma(float (&acc)[kNTiles][4], const A& a, const wgmma::Operand& b,
                                uint32_t block) {
    wgmma::bf16_m64n96k16(acc, a.lo, b.at(block));
    wgmma::bf16_m64n96k16(acc, a.hi, b.at(block + wgmma::kBlockUnits));
    wgmma::bf16_m64n96k16(acc, a.hi, b.at(block));
  }
};

struct Tf32 {
  using Raw = float;
  using Word = uint32_t;  // the TF32 bit pattern
  // One n-tile per chunk: {b0, b1} of both k8 halves.
  template <int kNT>
  static constexpr int kChunksOf = kNT;
  static constexpr int kChunks = kChunksOf<kNTiles>;
  struct A {
    uint32_t k8[2][4];
  };
  // m16n8k8: cols t, t+4 for the first half-step, 8+t, 12+t for the second.
  __device__ static int col(int t, int j) { return t + 4 * j; }
  // Cols t and t + 4 of each k8 half are the pair slot (t, or 4 + t) of one thread.
  __device__ static int pair(int c) { return (c >> 3) * 4 + (c & 3); }
  __device__ static int member(int c) { return (c >> 2) & 1; }
  __device__ static uint4 to_words4(uint4 v, Round) {
    return make_uint4(to_tf32(__uint_as_float(v.x)), to_tf32(__uint_as_float(v.y)),
                      to_tf32(__uint_as_float(v.z)), to_tf32(__uint_as_float(v.w)));
  }
  __device__ static void make_a(A& a, const Word (&x)[2][4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      a.k8[h][0] = x[0][2 * h];
      a.k8[h][1] = x[1][2 * h];
      a.k8[h][2] = x[0][2 * h + 1];
      a.k8[h][3] = x[1][2 * h + 1];
    }
  }
  template <int kNT>
  __device__ static void mma(float (&acc)[kNT][4], int chunk, const A& a, uint4 b) {
    tf32_1688(acc[chunk], a.k8[0], b.x, b.y);
    tf32_1688(acc[chunk], a.k8[1], b.z, b.w);
  }
  template <class W>
  __device__ static uint4 pack_b(const W& w, int chunk, int g, int t) {
    const int n = chunk * 8 + g;
    return make_uint4(to_tf32(w(n, col(t, 0))), to_tf32(w(n, col(t, 1))),
                      to_tf32(w(n, col(t, 2))), to_tf32(w(n, col(t, 3))));
  }
  // wgmma: block h holds taps 8h..8h+7 of the step, one per 4-byte word.
  static constexpr int kWgBlocks = 2;
  template <class W>
  __device__ static void wg_words(const W& w, int n, int unit, uint32_t (&words)[kWgBlocks]) {
    words[0] = to_tf32(w(n, unit));
    words[1] = to_tf32(w(n, 8 + unit));
  }
  __device__ static void wg_mma(float (&acc)[kNTiles][4], const A& a, const wgmma::Operand& b,
                                uint32_t block) {
    wgmma::tf32_m64n96k8(acc, a.k8[0], b.at(block));
    wgmma::tf32_m64n96k8(acc, a.k8[1], b.at(block + wgmma::kBlockUnits));
  }
};

// float16 (kBf16 = false) or bfloat16 inputs, carried as raw 16-bit patterns.
template <bool kBf16>
struct Half {
  static constexpr bool kIsBf16 = kBf16;
  using Raw = uint16_t;
  using Word = uint16_t;
  // Two n-tiles per chunk: {b0, b1} of each.
  template <int kNT>
  static constexpr int kChunksOf = kNT / 2;
  static constexpr int kChunks = kChunksOf<kNTiles>;
  struct A {
    uint32_t r[4];
  };
  __device__ static int col(int t, int j) { return col_k16(t, j); }
  __device__ static int pair(int c) { return k16_pair(c); }
  __device__ static int member(int c) { return k16_member(c); }
  __device__ static Word to_word(uint16_t x, Round) { return x; }
  __device__ static void make_a(A& a, const Word (&x)[2][4]) {
    a.r[0] = pack_u16(x[0][0], x[0][1]);
    a.r[1] = pack_u16(x[1][0], x[1][1]);
    a.r[2] = pack_u16(x[0][2], x[0][3]);
    a.r[3] = pack_u16(x[1][2], x[1][3]);
  }
  template <int kNT>
  __device__ static void mma(float (&acc)[kNT][4], int chunk, const A& a, uint4 b) {
    if constexpr (kBf16) {
      bf16_16816(acc[2 * chunk], a.r, b.x, b.y);
      bf16_16816(acc[2 * chunk + 1], a.r, b.z, b.w);
    } else {
      f16_16816(acc[2 * chunk], a.r, b.x, b.y);
      f16_16816(acc[2 * chunk + 1], a.r, b.z, b.w);
    }
  }
  // A chunk of B: n-tiles 2 * chunk and 2 * chunk + 1, each weight pair made one word by `pack`.
  template <class W, class Pack>
  __device__ static uint4 pack_b_as(const W& w, int chunk, int g, int t, Pack pack) {
    const int n0 = (2 * chunk) * 8 + g, n1 = n0 + 8;
    return make_uint4(pack(w(n0, col(t, 0)), w(n0, col(t, 1))), pack(w(n0, col(t, 2)), w(n0, col(t, 3))),
                      pack(w(n1, col(t, 0)), w(n1, col(t, 1))), pack(w(n1, col(t, 2)), w(n1, col(t, 3))));
  }
  template <class W>
  __device__ static uint4 pack_b(const W& w, int chunk, int g, int t) {
    return pack_b_as(w, chunk, g, t, [](uint16_t lo, uint16_t hi) { return pack_u16(lo, hi); });
  }
  static constexpr int kWgBlocks = 1;
  template <class W>
  __device__ static void wg_words(const W& w, int n, int unit, uint32_t (&words)[kWgBlocks]) {
    words[0] = pack_u16(w(n, 2 * unit), w(n, 2 * unit + 1));
  }
  __device__ static void wg_mma(float (&acc)[kNTiles][4], const A& a, const wgmma::Operand& b,
                                uint32_t block) {
    if constexpr (kBf16) {
      wgmma::bf16_m64n96k16(acc, a.r, b.at(block));
    } else {
      wgmma::f16_m64n96k16(acc, a.r, b.at(block));
    }
  }
};

// allow_tf32 multiplied as float16 (the space-to-depth kernels, and the register gather's Halves
// fit): float32 inputs and weights rounded to float16, whose 10-bit mantissa is TF32's, at twice
// TF32's tensor rate on half the operand bytes (cuBLAS calls this CUBLAS_COMPUTE_32F_FAST_16F).
// float16's narrow range is the kernel's to guard: weights come scaled by a power of two
// (common/weight_scale.cuh), and tiles whose inputs overflow float16 or all sit near its
// subnormals are computed exactly (the tile votes, common/tile_votes.cuh). The register gather
// stages it through registers only: a 16-bit slot holds half a float32 window, so nothing can
// land raw and convert in place.
struct Float32AsHalf : Half<false> {
  using Raw = float;
  static constexpr bool kScalesWeights = true;
  __device__ static Word to_word(float x, Round) { return __half_as_ushort(__float2half_rn(x)); }
  // Half's B with float weights (already scaled), rounded to float16.
  template <class W>
  __device__ static uint4 pack_b(const W& w, int chunk, int g, int t) {
    return pack_b_as(w, chunk, g, t, [](float lo, float hi) { return pack_half2(lo, hi); });
  }
  // wgmma's B (the Hopper space-to-depth kernel), rounded to float16.
  template <class W>
  __device__ static void wg_words(const W& w, int n, int unit, uint32_t (&words)[kWgBlocks]) {
    words[0] = pack_half2(w(n, 2 * unit), w(n, 2 * unit + 1));
  }
};

}  // namespace mma

// The plan's operand mode as a type, for a launch's template arguments: visit(ModeTag<Mode, T>{})
// with the mode's fragments and its inputs' storage dtype.
template <class M, DType T>
struct ModeTag {
  using Mode = M;
  static constexpr DType kDType = T;
};
template <class Visit>
auto visit_mode(OperandMode mode, Visit&& visit) {
  switch (mode) {
    case OperandMode::kFloat16: return visit(ModeTag<mma::Half<false>, DType::kFloat16>{});
    case OperandMode::kBFloat16: return visit(ModeTag<mma::Half<true>, DType::kBFloat16>{});
    case OperandMode::kTf32: return visit(ModeTag<mma::Tf32, DType::kFloat32>{});
    case OperandMode::kFloat32AsHalf: return visit(ModeTag<mma::Float32AsHalf, DType::kFloat32>{});
    case OperandMode::kBf16x3: break;
  }
  return visit(ModeTag<mma::Bf16x3, DType::kFloat32>{});
}
// The same for the space-to-depth families, which multiply float32 with allow_tf32 as float16
// words (operand_mode gives them no kTf32): `none` there, no TF32 kernel instantiated.
template <class R, class Visit>
R visit_mode_without_tf32(OperandMode mode, R none, Visit&& visit) {
  return visit_mode(mode, [&](auto tag) -> R {
    if constexpr (std::is_same_v<typename decltype(tag)::Mode, mma::Tf32>) {
      return none;
    } else {
      return visit(tag);
    }
  });
}

}  // namespace cuda
}  // namespace alexconv
