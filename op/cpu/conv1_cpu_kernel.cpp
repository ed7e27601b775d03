// The CPU micro-kernel, compiled once per instruction set: CMakeLists.txt names
// the set in ALEXCONV_CPU_ISA (baseline, avx2, avx512) and passes its compiler flags,
// and the vector width follows from those flags.
//
// Output channels run along the vector lanes, so each tap's weights are two
// vector loads and each input value is one broadcast that feeds two FMAs. Up to six
// (SSE2, NEON, AVX2) or twelve (AVX-512) pixels of one output row x two vectors of
// channels stay in registers for the whole 363-tap reduction, and are rounded (16-bit
// outputs), relu'd and stored from there.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__AVX2__) || defined(__AVX512F__)
// GCC 12's intrinsics (_mm512_shuffle_ps and others) pass _mm512_undefined_ps(), a
// self-initialised variable, which its own -Wuninitialized reports at each inlined use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

#include "../conv1_geometry.h"
#include "conv1_cpu_kernel.h"

#if !defined(ALEXCONV_CPU_ISA)
#error "compile this file through CMakeLists.txt, which sets ALEXCONV_CPU_ISA"
#endif
#define ALEXCONV_CONCAT_(a, b) a##b
#define ALEXCONV_CONCAT(a, b) ALEXCONV_CONCAT_(a, b)
#define ALEXCONV_STRING_(a) #a
#define ALEXCONV_STRING(a) ALEXCONV_STRING_(a)

namespace alexconv::cpu {
namespace {

// Lanes per vector and pixels per micro-tile: 2 x kTile accumulators, two weight
// vectors and a broadcast fill 15 of 16 registers (SSE2, NEON, AVX2) or 27 of 32 (AVX-512).
#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kTile = 12;
#elif defined(__AVX__)
constexpr int kLanes = 8;
constexpr int kTile = 6;
#else
constexpr int kLanes = 4;  // SSE2, NEON
constexpr int kTile = 6;
#endif
constexpr int64_t kChannelBlock = 2 * kLanes;

// GCC/Clang vector extensions: the compiler maps them onto this build's ISA.
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// at::relu's rule, v < 0 ? 0 : v (NaN and -0.0 compare false and pass unchanged), as a lane
// mask: a branch on each value's sign would mispredict half the time (measured slower).
inline Vec relu_lanes(Vec v) {
  const Vec zero = {};
  const auto negative = v < zero;  // all ones in the lanes to clear
  using Mask = std::remove_const_t<decltype(negative)>;
  return (Vec)((Mask)v & ~negative);
}

// 16-bit outputs: each lane's rounded value in the low half of a 32-bit lane.
typedef uint32_t Bits __attribute__((vector_size(kLanes * sizeof(uint32_t))));
typedef uint16_t Halves __attribute__((vector_size(kLanes * sizeof(uint16_t))));

// float -> bfloat16 bits as c10::BFloat16 rounds: to nearest even, NaN -> 0x7fc0 (sign dropped).
inline Bits to_bfloat16(Vec v) {
  Bits u;
  std::memcpy(&u, &v, sizeof(u));
  const Bits rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const Bits nan = (Bits)(v != v);  // all ones in NaN lanes
  return (rounded & ~nan) | (0x7fc0u & nan);
}

#if !defined(__AVX512F__) && !defined(__F16C__)
// float -> float16 bits, to nearest even, as c10::Half rounds (NaN -> sign | 0x7e00).
inline uint32_t float16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to Inf (65520 and up)
  if (ax >= 0x38800000u) {                       // a normal float16 (2^-14 and up)
    const uint32_t r = ax - 0x38000000u;         // exponent rebiased from 127 to 15
    return sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
  }
  // A subnormal float16 (units of 2^-24) or zero: ax = m * 2^(e - 150).
  const uint32_t e = ax >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to zero
  const uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;  // 14..24
  const uint32_t q = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  return sign | (q + (rest > half || (rest == half && (q & 1u))));
}
#endif

// float -> float16 bits, to nearest even: F16C / AVX-512F's vcvtps2ph where this build has it.
inline Bits to_float16(Vec v) {
#if defined(__AVX512F__)
  const __m256i h = _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  Halves halves;
  std::memcpy(&halves, &h, sizeof(halves));
  return __builtin_convertvector(halves, Bits);
#elif defined(__F16C__) && defined(__AVX2__)
  const __m128i h = _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  Halves halves;
  std::memcpy(&halves, &h, sizeof(halves));
  return __builtin_convertvector(halves, Bits);
#else
  Bits out;
  for (int l = 0; l < kLanes; ++l) out[l] = float16_bits(v[l]);
  return out;
#endif
}

// at::relu on rounded 16-bit values: negative, non-zero and not NaN (magnitude 1 to Inf's) -> +0.
// Applied after rounding, so a small negative value that rounds to -0.0 stays -0.0, as F.relu
// of the unfused op's output gives.
inline Bits relu_bits(Bits r, uint32_t inf_bits) {
  const Bits magnitude = r & 0x7fffu;
  const Bits clear = (Bits)((r & 0x8000u) != 0u) & (Bits)(magnitude - 1u < inf_bits);
  return r & ~clear;
}

// Stores one pixel's lanes for channels [0, channels) of a vector: lane l goes to
// out[l * channel_stride]. A full vector with unit channel stride (channels_last) is one store.
inline void store_lanes(float* out, Vec v, int channels, int64_t channel_stride) {
  if (channel_stride == 1 && channels >= kLanes) {
    std::memcpy(out, &v, sizeof(v));
    return;
  }
  for (int l = 0; l < kLanes && l < channels; ++l) out[l * channel_stride] = v[l];
}
inline void store_lanes(uint16_t* out, Bits r, int channels, int64_t channel_stride) {
  if (channel_stride == 1 && channels >= kLanes) {
    const Halves h = __builtin_convertvector(r, Halves);
    std::memcpy(out, &h, sizeof(h));
    return;
  }
  for (int l = 0; l < kLanes && l < channels; ++l) out[l * channel_stride] = static_cast<uint16_t>(r[l]);
}

// Rounds (16-bit outputs), applies relu and stores one accumulator vector of one pixel.
template <OutType T>
inline void store_vector(const Band& band, Vec v, int64_t offset, int channels) {
  if constexpr (T == OutType::kFloat32) {
    store_lanes(static_cast<float*>(band.out) + offset, band.relu ? relu_lanes(v) : v, channels,
                band.channel_stride);
  } else if constexpr (T == OutType::kBFloat16) {
    const Bits r = to_bfloat16(v);
    store_lanes(static_cast<uint16_t*>(band.out) + offset, band.relu ? relu_bits(r, 0x7f80u) : r,
                channels, band.channel_stride);
  } else {
    const Bits r = to_float16(v);
    store_lanes(static_cast<uint16_t*>(band.out) + offset, band.relu ? relu_bits(r, 0x7c00u) : r,
                channels, band.channel_stride);
  }
}

// Stores the first `pixels` of a tile's N pixels, pixel j's two vectors at lo_offset +
// pixel_offset[j] and hi_offset + pixel_offset[j]. One switch on the output type per tile:
// one per vector made AVX2's NCHW stores slower (docs/perf-notes.md, "The CPU code's choices").
template <OutType T, int N>
inline void store_tile_as(const Band& band, const Vec (&lo)[N], const Vec (&hi)[N], int pixels,
                          int channels, int64_t lo_offset, int64_t hi_offset,
                          const int64_t (&pixel_offset)[N]) {
#pragma GCC unroll 12
  for (int j = 0; j < N; ++j) {
    if (j >= pixels) break;
    store_vector<T>(band, lo[j], lo_offset + pixel_offset[j], channels);
    if (channels > kLanes) store_vector<T>(band, hi[j], hi_offset + pixel_offset[j], channels - kLanes);
  }
}

template <int N>
inline void store_tile(const Band& band, const Vec (&lo)[N], const Vec (&hi)[N], int pixels,
                       int channels, int64_t lo_offset, int64_t hi_offset,
                       const int64_t (&pixel_offset)[N]) {
  switch (band.out_type) {
    case OutType::kFloat32:
      store_tile_as<OutType::kFloat32>(band, lo, hi, pixels, channels, lo_offset, hi_offset, pixel_offset);
      break;
    case OutType::kBFloat16:
      store_tile_as<OutType::kBFloat16>(band, lo, hi, pixels, channels, lo_offset, hi_offset, pixel_offset);
      break;
    case OutType::kFloat16:
      store_tile_as<OutType::kFloat16>(band, lo, hi, pixels, channels, lo_offset, hi_offset, pixel_offset);
      break;
  }
}

#if defined(__AVX512F__)
// Transposes 16 x 16 floats in registers: afterwards r[c] lane j holds what r[j] lane c held.
// Rows past `rows` are taken as zero and not read.
template <int rows>
inline void transpose16(__m512 (&r)[16]) {
  for (int i = rows; i < 16; ++i) r[i] = _mm512_setzero_ps();
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {  // 128-bit lane L of t[i]: r[i][4L], r[i+1][4L], r[i][4L+1], r[i+1][4L+1]
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // lane L of r[i + e]: rows i..i+3, element 4L + e
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Each element e: a 4 x 4 transpose of 128-bit lanes across r[e], r[4+e], r[8+e], r[12+e].
  for (int e = 0; e < 4; ++e) {
    const __m512 s0 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x88);
    const __m512 s1 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xdd);
    const __m512 s2 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x88);
    const __m512 s3 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xdd);
    t[e] = _mm512_shuffle_f32x4(s0, s2, 0x88);       // element e of lane 0: channel e
    t[4 + e] = _mm512_shuffle_f32x4(s1, s3, 0x88);   // channel 4 + e
    t[8 + e] = _mm512_shuffle_f32x4(s0, s2, 0xdd);   // channel 8 + e
    t[12 + e] = _mm512_shuffle_f32x4(s1, s3, 0xdd);  // channel 12 + e
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// Stores lanes [0, pixels) of v (consecutive pixels of one channel) to out + offset on,
// rounded and relu'd as store_vector does.
template <OutType T>
inline void store_pixels(const Band& band, Vec v, int64_t offset, int pixels) {
  const __mmask16 mask = static_cast<__mmask16>((1u << pixels) - 1);
  if constexpr (T == OutType::kFloat32) {
    _mm512_mask_storeu_ps(static_cast<float*>(band.out) + offset, mask,
                          (__m512)(band.relu ? relu_lanes(v) : v));
  } else {
    Bits r;
    if constexpr (T == OutType::kBFloat16) {
      r = to_bfloat16(v);
      if (band.relu) r = relu_bits(r, 0x7f80u);
    } else {
      r = to_float16(v);
      if (band.relu) r = relu_bits(r, 0x7c00u);
    }
    const Halves h = __builtin_convertvector(r, Halves);
    _mm256_mask_storeu_epi16(static_cast<uint16_t*>(band.out) + offset, mask, (__m256i)h);
  }
}

// One vector of channels for P pixels, in a layout with unit column stride (NCHW): a
// transpose, then one masked store per channel, instead of P scalar stores per channel.
template <OutType T, int P>
inline void store_transposed(const Band& band, const Vec (&acc)[P], int64_t offset, int channels) {
  __m512 r[16];
  for (int j = 0; j < P; ++j) r[j] = (__m512)acc[j];
  transpose16<P>(r);
  for (int c = 0; c < kLanes && c < channels; ++c) {
    store_pixels<T>(band, (Vec)r[c], offset + c * band.channel_stride, P);
  }
}

template <OutType T, int P>
inline void store_tile_transposed(const Band& band, const Vec (&lo)[P], const Vec (&hi)[P],
                                  int channels, int64_t lo_offset, int64_t hi_offset) {
  store_transposed<T, P>(band, lo, lo_offset, channels);
  if (channels > kLanes) store_transposed<T, P>(band, hi, hi_offset, channels - kLanes);
}
#endif

#if defined(__AVX512F__)
// Stores a micro-tile's P pixels x kChannelBlock channels (rounded, relu'd): NCHW outputs through
// the transpose, others pixel by pixel.
template <int P>
inline void store_micro_tile(const Band& band, const Vec (&lo)[P], const Vec (&hi)[P], int channels,
                             int64_t c0, int64_t out_offset) {
  const int64_t lo_offset = out_offset + c0 * band.channel_stride;
  const int64_t hi_offset = out_offset + (c0 + kLanes) * band.channel_stride;
  if (band.col_stride == 1 && band.channel_stride != 1) {
    switch (band.out_type) {
      case OutType::kFloat32:
        store_tile_transposed<OutType::kFloat32, P>(band, lo, hi, channels, lo_offset, hi_offset);
        break;
      case OutType::kBFloat16:
        store_tile_transposed<OutType::kBFloat16, P>(band, lo, hi, channels, lo_offset, hi_offset);
        break;
      case OutType::kFloat16:
        store_tile_transposed<OutType::kFloat16, P>(band, lo, hi, channels, lo_offset, hi_offset);
        break;
    }
    return;
  }
  int64_t pixel_offset[P];
  for (int j = 0; j < P; ++j) pixel_offset[j] = j * band.col_stride;
  store_tile<P>(band, lo, hi, P, channels, lo_offset, hi_offset, pixel_offset);
}

// A micro-tile's accumulators, each pixel's two vectors at the block's bias. Unrolled whatever the
// optimisation level: a loop over lo[j] would put the accumulators on the stack.
template <int P>
__attribute__((always_inline)) inline void start_at_bias(const float* bias, Vec (&lo)[P], Vec (&hi)[P]) {
  const Vec bias_lo = load(bias), bias_hi = load(bias + kLanes);
#pragma GCC unroll 12
  for (int j = 0; j < P; ++j) {
    lo[j] = bias_lo;
    hi[j] = bias_hi;
  }
}

// One micro-tile: P consecutive pixels of one output row (window is the first one's 11x11x3
// window; the next pixel's starts kStride columns on) and kChannelBlock channels from c0
// (weights w, packed [tap][channel]). Channels from `channels` on pad the last channel block
// (zero weights) and are not stored. One pointer walks the taps and every broadcast is at a
// constant offset from it: with pixels from two rows, the twelve window pointers of AVX-512's
// tile spilled (general registers) and the accumulators with them.
template <int P>
void multiply_tile(const Band& band, const float* window, int channels, const float* w,
                   const float* bias, int64_t c0, int64_t out_offset) {
  const int64_t plane_pitch = band.plane_pitch, row_pitch = band.row_pitch;
  Vec lo[P], hi[P];
  start_at_bias(bias, lo, hi);
  for (int64_t ci = 0; ci < kInChannels; ++ci) {
    for (int64_t r = 0; r < kKernel; ++r) {
      const float* row = window + ci * plane_pitch + r * row_pitch;
      // Not unrolled: across taps s and s + 4 the tile's pixels read the same values, and GCC,
      // seeing that, keeps broadcasts for later taps alive and spills them.
#pragma GCC unroll 1
      for (int64_t s = 0; s < kKernel; ++s) {
        const Vec w_lo = load(w), w_hi = load(w + kLanes);
        w += kChannelBlock;
#pragma GCC unroll 12
        for (int j = 0; j < P; ++j) {
          const float x = row[kStride * j + s];
          lo[j] += w_lo * x;
          hi[j] += w_hi * x;
        }
      }
    }
  }
  store_micro_tile<P>(band, lo, hi, channels, c0, out_offset);
}

using TileFn = void (*)(const Band&, const float*, int, const float*, const float*, int64_t, int64_t);

// multiply_tile<P> for P = 1 .. kTile, in a table of this file's own (no std:: function
// template whose copies the linker could merge across the ISA builds).
template <typename Sequence>
struct TileTable;
template <int... P>
struct TileTable<std::integer_sequence<int, P...>> {
  static constexpr TileFn fns[sizeof...(P)] = {&multiply_tile<P + 1>...};
};
using Tiles = TileTable<std::make_integer_sequence<int, kTile>>;

// Calls tile(pixels, y, x, c0, channels) for each micro-tile of the band: per channel block (its
// weights stay in L1 or L2 across the band), each row split into the fewest tiles of at most
// kTile pixels, as even as can be (55 columns: five of 11): no tile computes padding, and none but
// in rows under kTile pixels has fewer than half the lanes' worth of independent FMA chains.
template <typename TileCall>
inline void for_each_tile(const Band& band, TileCall tile) {
  const int64_t cols = band.out_cols;
  const int64_t tiles = (cols + kTile - 1) / kTile;
  for (int64_t c0 = 0; c0 < band.channels; c0 += kChannelBlock) {
    const int channels =
        static_cast<int>(band.channels - c0 < kChannelBlock ? band.channels - c0 : kChannelBlock);
    for (int64_t y = 0; y < band.out_rows; ++y) {
      for (int64_t t = 0, x = 0; t < tiles; ++t) {
        const int64_t end = cols * (t + 1) / tiles;
        tile(static_cast<int>(end - x), y, x, c0, channels);
        x = end;
      }
    }
  }
}

void run_band(const Band& band, const float* packed_weights, const float* bias) {
  for_each_tile(band, [&](int pixels, int64_t y, int64_t x, int64_t c0, int channels) {
    Tiles::fns[pixels - 1](band, band.image + kStride * (y * band.row_pitch + x), channels,
                           packed_weights + c0 * kTaps, bias + c0, c0, y * band.row_stride + x * band.col_stride);
  });
}

#if defined(ALEXCONV_CPU_PAIRS)
// acc + two taps per lane, vdpbf16ps's way: per 32-bit lane, the high halves' product added
// first, then the low halves'. A product of two bfloat16 values is exact in float, so each
// step is one FMA: the emulated build (no AVX512-BF16) gives the same bits but for subnormal
// operands and sums, which the instruction flushes to zero.
inline Vec dot_pairs(Vec acc, __m512i w, __m512i x) {
#if defined(__AVX512BF16__)
  return (Vec)_mm512_dpbf16_ps((__m512)acc, (__m512bh)w, (__m512bh)x);
#else
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const __m512 w_high = _mm512_castsi512_ps(_mm512_and_si512(w, high));
  const __m512 x_high = _mm512_castsi512_ps(_mm512_and_si512(x, high));
  const __m512 w_low = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  const __m512 x_low = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  return (Vec)_mm512_fmadd_ps(w_low, x_low, _mm512_fmadd_ps(w_high, x_high, (__m512)acc));
#endif
}

// multiply_tile on pairs of taps (Band::pairs): per input channel, five pairs of window rows
// (row pair 2y + k of the band) and the eleventh row beside a zero (tail row y), each a
// 32-bit broadcast that feeds two dot products. Half the multiply instructions of the float
// path for 363 / 396 of the slots.
template <int P>
void multiply_tile_pairs(const Band& band, const uint32_t* pairs, const uint32_t* tail, int channels,
                         const uint32_t* w, const float* bias, int64_t c0, int64_t out_offset) {
  Vec lo[P], hi[P];
  start_at_bias(bias, lo, hi);
  for (int64_t ci = 0; ci < kInChannels; ++ci) {
    for (int64_t k = 0; k < kRowPairs; ++k) {
      const uint32_t* row = k + 1 < kRowPairs ? pairs + ci * band.pair_plane_pitch + k * band.row_pitch
                                              : tail + ci * band.tail_plane_pitch;
#pragma GCC unroll 1
      for (int64_t s = 0; s < kKernel; ++s) {
        const __m512i w_lo = _mm512_loadu_si512(w), w_hi = _mm512_loadu_si512(w + kLanes);
        w += kChannelBlock;
#pragma GCC unroll 12
        for (int j = 0; j < P; ++j) {
          const __m512i x = _mm512_set1_epi32(static_cast<int>(row[kStride * j + s]));
          lo[j] = dot_pairs(lo[j], w_lo, x);
          hi[j] = dot_pairs(hi[j], w_hi, x);
        }
      }
    }
  }
  store_micro_tile<P>(band, lo, hi, channels, c0, out_offset);
}

using PairTileFn = void (*)(const Band&, const uint32_t*, const uint32_t*, int, const uint32_t*, const float*,
                            int64_t, int64_t);
template <typename Sequence>
struct PairTileTable;
template <int... P>
struct PairTileTable<std::integer_sequence<int, P...>> {
  static constexpr PairTileFn fns[sizeof...(P)] = {&multiply_tile_pairs<P + 1>...};
};
using PairTiles = PairTileTable<std::make_integer_sequence<int, kTile>>;

// run_band's tiling, on pairs.
void run_band_pairs(const Band& band, const uint32_t* packed_pairs, const float* bias) {
  for_each_tile(band, [&](int pixels, int64_t y, int64_t x, int64_t c0, int channels) {
    PairTiles::fns[pixels - 1](band, band.pairs + 2 * y * band.row_pitch + kStride * x,
                               band.tails + y * band.row_pitch + kStride * x, channels, packed_pairs + c0 * kPairTaps,
                               bias + c0, c0, y * band.row_stride + x * band.col_stride);
  });
}
#define ALEXCONV_RUN_BAND_PAIRS &run_band_pairs
#else
#define ALEXCONV_RUN_BAND_PAIRS nullptr
#endif

#else  // SSE2, NEON, AVX2

// One micro-tile: kTile pixels (window[j] is pixel j's 11x11x3 window) and kChannelBlock
// channels (weights w, packed [tap][channel]) from c0. The pixels need not share a row (six
// window pointers fit the general registers): only a band's last tile computes padding,
// duplicates of its last pixel from `pixels` on, which are not stored, nor are channels from
// `channels` on (zero weights padding the last block). Tiles within rows, as AVX-512's, split
// 55 columns into tiles of 6 and 5 pixels: slower under AVX2 (perf-notes, "The CPU code's choices").
void multiply_tile(const Band& band, const float* const window[kTile], int pixels, int channels,
                   const float* w, const float* bias, int64_t c0, const int64_t (&out_pixel)[kTile]) {
  const int64_t plane_pitch = band.plane_pitch, row_pitch = band.row_pitch;
  const Vec bias_lo = load(bias), bias_hi = load(bias + kLanes);
  Vec lo[kTile], hi[kTile];
  // Unrolled whatever the optimisation level: a loop over lo[j] would put the
  // accumulators on the stack.
#pragma GCC unroll 6
  for (int j = 0; j < kTile; ++j) {
    lo[j] = bias_lo;
    hi[j] = bias_hi;
  }
  for (int64_t ci = 0; ci < kInChannels; ++ci) {
    for (int64_t r = 0; r < kKernel; ++r) {
      const int64_t row = ci * plane_pitch + r * row_pitch;
#pragma GCC unroll 11
      for (int64_t s = 0; s < kKernel; ++s) {
        const Vec w_lo = load(w), w_hi = load(w + kLanes);
        w += kChannelBlock;
#pragma GCC unroll 6
        for (int j = 0; j < kTile; ++j) {
          const float x = window[j][row + s];
          lo[j] += w_lo * x;
          hi[j] += w_hi * x;
        }
      }
    }
  }
  store_tile<kTile>(band, lo, hi, pixels, channels, c0 * band.channel_stride,
                    (c0 + kLanes) * band.channel_stride, out_pixel);
}

void run_band(const Band& band, const float* packed_weights, const float* bias) {
  const int64_t pixels = band.out_rows * band.out_cols;
  for (int64_t c0 = 0; c0 < band.channels; c0 += kChannelBlock) {
    const int channels =
        static_cast<int>(band.channels - c0 < kChannelBlock ? band.channels - c0 : kChannelBlock);
    // This block's weights, [kTaps][kChannelBlock], stay in L1 across the band.
    const float* w = packed_weights + c0 * kTaps;
    for (int64_t p0 = 0; p0 < pixels; p0 += kTile) {
      const int count = static_cast<int>(pixels - p0 < kTile ? pixels - p0 : kTile);
      const float* window[kTile];
      int64_t out_pixel[kTile];
      for (int j = 0; j < kTile; ++j) {
        const int64_t p = p0 + (j < count ? j : count - 1);
        const int64_t y = p / band.out_cols, x = p % band.out_cols;
        window[j] = band.image + kStride * (y * band.row_pitch + x);
        out_pixel[j] = y * band.row_stride + x * band.col_stride;
      }
      multiply_tile(band, window, count, channels, w, bias + c0, c0, out_pixel);
    }
  }
}

#endif

#if defined(__AVX512F__)
// Kernel::pack_weights: 16 channels x 16 taps at a time through the transpose, faster than the
// caller's element-by-element loop (perf-notes, "The CPU code's choices").
void pack_weights(const float* weights, int64_t channels, float* packed) {
  const int64_t blocks = (channels + kChannelBlock - 1) / kChannelBlock;
  for (int64_t b = 0; b < blocks; ++b) {
    float* dst = packed + b * kTaps * kChannelBlock;
    for (int half = 0; half < 2; ++half) {
      const int64_t c0 = b * kChannelBlock + half * kLanes;
      for (int64_t t0 = 0; t0 < kTaps; t0 += 16) {
        const int taps = static_cast<int>(kTaps - t0 < 16 ? kTaps - t0 : 16);
        const __mmask16 mask = static_cast<__mmask16>((1u << taps) - 1);
        __m512 r[16];
        for (int k = 0; k < 16; ++k) {
          r[k] = c0 + k < channels ? _mm512_maskz_loadu_ps(mask, weights + (c0 + k) * kTaps + t0)
                                   : _mm512_setzero_ps();
        }
        transpose16<16>(r);
        for (int i = 0; i < taps; ++i) _mm512_storeu_ps(dst + (t0 + i) * kChannelBlock + half * kLanes, r[i]);
      }
    }
  }
}
#endif

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__F16C__))
// Kernel::widen_float16: staging float16 input through c10::Half's software conversion made
// float16 calls slower than bfloat16 ones (perf-notes, "The CPU code's choices").
void widen_float16(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, mask, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, src + i)));
  }
#else
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
#endif
}
#define ALEXCONV_WIDEN_FLOAT16 &widen_float16
#else
#define ALEXCONV_WIDEN_FLOAT16 nullptr
#endif

#if defined(__AVX512F__)
// Kernel::split3: 16 pixels at a time, each plane gathered from three vectors by two
// two-source permutes, a third less time than the caller's scalar loop; both wait on the
// input's reads (perf-notes, "The CPU code's choices").
void split3(const float* src, int64_t n, float* d0, float* d1, float* d2) {
  float* const dst[3] = {d0, d1, d2};
  __m512i first[3], second[3];
  for (int k = 0; k < 3; ++k) {
    alignas(64) int32_t a[16], b[16];
    for (int i = 0; i < 16; ++i) {
      const int e = 3 * i + k;     // element e of the 48 loaded
      a[i] = e < 32 ? e : 0;       // from the first two vectors (index bit 4: the second)
      b[i] = e < 32 ? i : 16 + e - 32;  // kept from that, or from the third vector
    }
    first[k] = _mm512_load_si512(a);
    second[k] = _mm512_load_si512(b);
  }
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const float* s = src + 3 * i;
    const __m512 v0 = _mm512_loadu_ps(s), v1 = _mm512_loadu_ps(s + 16), v2 = _mm512_loadu_ps(s + 32);
    for (int k = 0; k < 3; ++k) {
      const __m512 t = _mm512_permutex2var_ps(v0, first[k], v1);
      _mm512_storeu_ps(dst[k] + i, _mm512_permutex2var_ps(t, second[k], v2));
    }
  }
  if (i < n) {  // the last 1-15 pixels, masked
    auto mask_of = [](int64_t count) {
      return static_cast<__mmask16>(count >= 16 ? 0xffff : count <= 0 ? 0 : (1u << count) - 1);
    };
    const int64_t values = 3 * (n - i);
    const float* s = src + 3 * i;
    const __m512 v0 = _mm512_maskz_loadu_ps(mask_of(values), s);
    const __m512 v1 = _mm512_maskz_loadu_ps(mask_of(values - 16), s + 16);
    const __m512 v2 = _mm512_maskz_loadu_ps(mask_of(values - 32), s + 32);
    for (int k = 0; k < 3; ++k) {
      const __m512 t = _mm512_permutex2var_ps(v0, first[k], v1);
      _mm512_mask_storeu_ps(dst[k] + i, mask_of(n - i), _mm512_permutex2var_ps(t, second[k], v2));
    }
  }
}
#define ALEXCONV_SPLIT3 &split3
#else
#define ALEXCONV_SPLIT3 nullptr
#endif

}  // namespace

Kernel ALEXCONV_CONCAT(ALEXCONV_CPU_ISA, _kernel)() {
#if defined(__AVX512F__)
  return Kernel{ALEXCONV_STRING(ALEXCONV_CPU_ISA), kChannelBlock, &run_band, &pack_weights,
                ALEXCONV_WIDEN_FLOAT16, ALEXCONV_SPLIT3, ALEXCONV_RUN_BAND_PAIRS};
#else
  return Kernel{ALEXCONV_STRING(ALEXCONV_CPU_ISA), kChannelBlock, &run_band, nullptr, ALEXCONV_WIDEN_FLOAT16,
                ALEXCONV_SPLIT3, nullptr};
#endif
}

}  // namespace alexconv::cpu
