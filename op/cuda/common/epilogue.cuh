// The implicit-GEMM kernels' accumulators and how they leave: consumer warps hold
// 16 pixels x 96 channels each in the mma.sync m16n8 accumulator layout (which a
// wgmma m64n96 warpgroup shares, warp w holding its rows 16w..16w+15), starting
// every tile at the bias.
#pragma once

#include <cstdint>

#include "../../conv1_geometry.h"
#include "../kernel_api.h"  // DType, Problem
#include "dtype.cuh"
#include "operand_modes.cuh"
#include "../arch/named_barriers.cuh"

namespace alexconv {
namespace cuda {

constexpr int kMTiles = 1;  // m16 row tiles per warp (16 pixels)

// A warpgroup's 64-pixel x 96-channel output block, staged pixel-major. A pixel
// row is 49 words: odd, so reading one channel across 32 pixels is conflict-free.
// (Kernels that compute kNT n-tiles, 8 * kNT of the channels, stage that many: 25 words
// for 48 channels, odd as well.)
template <int kNT>
constexpr int kStagedPitchOf = kNT * 8 + 2;
template <int kNT>
constexpr int kStagedElemsOf = 64 * kStagedPitchOf<kNT>;
constexpr int kStagedPitch = kStagedPitchOf<mma::kNTiles>;
constexpr int kStagedElems = kStagedElemsOf<mma::kNTiles>;

// Accumulators start every tile at the bias, so the epilogue adds nothing.
template <int kNT, int kMT>
__device__ __forceinline__ void init_accumulators(float (&acc)[kMT][kNT][4], const float* bias, int t) {
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    const float2 b = *reinterpret_cast<const float2*>(bias + nt * 8 + 2 * t);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      acc[mt][nt][0] = acc[mt][nt][2] = b.x;
      acc[mt][nt][1] = acc[mt][nt][3] = b.y;
    }
  }
}

// Zero accumulators, for kernels that add the bias at the store (weights scaled by a power of
// two: see unscale_accumulators).
template <int kNT, int kMT>
__device__ __forceinline__ void zero_accumulators(float (&acc)[kMT][kNT][4]) {
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
    }
  }
}

// Accumulators of weights multiplied by a power of two, times its inverse: exact.
template <int kNT, int kMT>
__device__ __forceinline__ void unscale_accumulators(float (&acc)[kMT][kNT][4], float unscale) {
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] *= unscale;
    }
  }
}

// Adds the bias to accumulators that started at zero.
template <int kNT, int kMT>
__device__ __forceinline__ void add_bias(float (&acc)[kMT][kNT][4], const float* bias, int t) {
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    const float2 b = *reinterpret_cast<const float2*>(bias + nt * 8 + 2 * t);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      acc[mt][nt][0] += b.x;
      acc[mt][nt][2] += b.x;
      acc[mt][nt][1] += b.y;
      acc[mt][nt][3] += b.y;
    }
  }
}

// float32 outputs (the only ones stored this way; 16-bit ones go through
// store_tile_staged), straight from the accumulators: no shared memory is left for
// staging them. Lanes t and t ^ 2 of a quad first swap half of their values, so
// that a store instruction writes 16 consecutive pixels of each of 2 channels
// rather than 8 pixels of each of 4: fewer 128-byte lines per instruction, which
// measured faster (docs/perf-notes.md, "Versions", lane-swapped float32 stores).
//
// The n-tile a count that is no multiple of 8 ends in: channels ch and ch + 4, each where it is
// one of the call's. Not inlined: the per-channel compares inside the unrolled store loop made
// ptxas spill 92-364 bytes in the resident float32 kernels (docs/perf-notes.md, "Every padding
// and channel count"); as a call taken at most once per tile, none.
static __device__ __noinline__ void store_channels_below(float* out, int64_t ch, int64_t step, int channels,
                                                  float first, float second) {
  if (ch < channels) out[ch * step] = first;
  if (ch + 4 < channels) out[(ch + 4) * step] = second;
}

// Channels-last outputs (Problem::out_pixel_major) need no swap: a thread's two
// adjacent channels are 8 contiguous bytes, and an instruction writes 8 pixels x
// 32 bytes, whole sectors.
// pixel_major: Problem::out_pixel_major, or the caller's compile-time copy of it.
// Every epilogue stores the first p.out_channels channels (any count up to 96; pixel-major
// outputs whole n-tiles of them, pixel_major_output) and applies p.relu to what it stores
// (relu_output).
// The accumulators are the tile's last use of them: relu rewrites them in place (no
// registers beside them; the resident TF32 mma.sync kernels are at the edge of spilling),
// and p.out_channels is read where used (a Whole kernel's p is its parameter, in the
// constant bank).
template <int kNT, int kMT>
__device__ __forceinline__ void store_tile(float (&acc)[kMT][kNT][4],
                                           const int64_t (&pixel_out)[kMT][2], const Problem& p,
                                           int t, bool pixel_major) {
  float* out = static_cast<float*>(p.output);
  if (p.relu) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] = relu_output<DType::kFloat32>(acc[mt][nt][e], true);
      }
    }
  }
  if (pixel_major) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (pixel_out[mt][h] < 0) continue;
        float2* pixel = reinterpret_cast<float2*>(out + pixel_out[mt][h] + 2 * t);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          if (nt * 8 >= p.out_channels) break;
          pixel[nt * 4] = make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
        }
      }
    }
    return;
  }
  const int64_t channel_step = p.out_stride[1];
  const bool upper = t >= 2;  // after the swap: pixel g + 8, else pixel g
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    const int64_t base = upper ? pixel_out[mt][1] : pixel_out[mt][0];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float keep = upper ? acc[mt][nt][2 + e] : acc[mt][nt][e];
        const float send = upper ? acc[mt][nt][e] : acc[mt][nt][2 + e];
        const float got = __shfl_xor_sync(0xffffffffu, send, 2);
        const int64_t ch = nt * 8 + 2 * (t & 1) + e;  // and ch + 4
        if constexpr (kAnyChannelCount) {  // after the shuffle: every lane takes part
          if (base >= 0 && nt * 8 + 8 <= p.out_channels) {
            out[base + ch * channel_step] = upper ? got : keep;
            out[base + (ch + 4) * channel_step] = upper ? keep : got;
          } else if (base >= 0 && nt * 8 < p.out_channels) {
            store_channels_below(out + base, ch, channel_step, int(p.out_channels), upper ? got : keep,
                                 upper ? keep : got);
          }
        } else if (base >= 0 && nt * 8 < p.out_channels) {  // whole n-tiles only
          out[base + ch * channel_step] = upper ? got : keep;
          out[base + (ch + 4) * channel_step] = upper ? keep : got;
        }
      }
    }
  }
}

// Writes a warp's 16 kMT accumulator rows (pixels first_row ...) into a staged block as
// 16-bit values, relu applied per value where the call fuses it (relu_output), in one copy of
// the loop -- two copies, one per relu, made ptxas spill in the space-to-depth kernel's two
// accumulator sets.
template <DType T, int kNT, int kMT>
__device__ __forceinline__ void stage_rows(const float (&acc)[kMT][kNT][4], uint16_t* block,
                                           int first_row, int lane, bool relu) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint16_t* row = block + (first_row + mt * 16 + h * 8 + g) * kStagedPitchOf<kNT>;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        *reinterpret_cast<uint32_t*>(row + nt * 8 + 2 * t) =
            mma::pack_u16(relu_output<T>(acc[mt][nt][2 * h], relu), relu_output<T>(acc[mt][nt][2 * h + 1], relu));
      }
    }
  }
}

// A warpgroup's 64-pixel block is staged by 4 / kMT warps of 16 kMT rows each (one m-tile a
// warp: a wgmma warpgroup's four; two: the portable space-to-depth kernel's halves), which meet
// at their group's named barrier.
template <int kMT>
struct StagedGroups {
  static_assert(kMT == 1 || kMT == 2, "16 or 32 rows a warp");
  static constexpr int kWarps = 4 / kMT;
  __device__ static void barrier(int group) { named_barrier_sync<32 * kWarps>(epilogue_group_barrier(group)); }
};

// 16-bit channels-last outputs (Problem::out_pixel_major) need no transpose, only
// wide stores: each warp stages its own 16 pixel rows (so no group barrier) and
// reads them back as 16-byte units, lanes l and l + 16 the even and the odd units
// of pixel l: an instruction writes 16 pixels' 32-byte sectors whole.
template <DType T, int kNT, int kMT, class OutOf>
__device__ __forceinline__ void store_tile_pixel_major(const float (&acc)[kMT][kNT][4],
                                                       uint16_t* staged, const Problem& p, int warp,
                                                       int lane, const OutOf& out_of) {
  constexpr int kGroupWarps = StagedGroups<kMT>::kWarps;
  const int group = warp / kGroupWarps, group_warp = warp % kGroupWarps, pixel = lane & 15, odd = lane >> 4;
  uint16_t* block = staged + group * kStagedElemsOf<kNT>;
  __syncwarp();  // the warp's reads of the previous tile are done
  stage_rows<T>(acc, block, group_warp * 16 * kMT, lane, p.relu);
  __syncwarp();
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    const int row = group_warp * 16 * kMT + mt * 16 + pixel;
    const int64_t base = out_of(group * 64 + row);
    if (base < 0) continue;
    uint16_t* out = static_cast<uint16_t*>(p.output) + base;
    // Pixel rows are 4-byte aligned (kStagedPitch is even): four 32-bit reads a unit.
    const uint32_t* from = reinterpret_cast<const uint32_t*>(block + row * kStagedPitchOf<kNT>);
#pragma unroll
    for (int i = 0; i < kNT / 2; ++i) {
      const int unit = 2 * i + odd;
      if (unit * 8 >= p.out_channels) break;
      const uint32_t* w = from + unit * 4;
      *reinterpret_cast<uint4*>(out + unit * 8) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

// 16-bit outputs: each group of 4 consumer warps (a wgmma warpgroup; 64 tile
// pixels) transposes its block through shared memory, so that a store instruction
// writes 32 consecutive pixels of one channel (64 contiguous bytes in NCHW)
// instead of 8 pixels of each of 4 channels. Channels-last outputs go to
// store_tile_pixel_major (pixel_major: Problem::out_pixel_major, or the caller's
// compile-time copy of it).
// out_of(local) is tile pixel `local`'s output offset, -1 where it has none.
template <DType T, int kNT, int kMT, class OutOf>
__device__ __forceinline__ void store_tile_staged(const float (&acc)[kMT][kNT][4],
                                                  uint16_t* staged, const Problem& p, int warp,
                                                  int lane, bool pixel_major, const OutOf& out_of) {
  if (pixel_major) {
    store_tile_pixel_major<T>(acc, staged, p, warp, lane, out_of);
    return;
  }
  constexpr int kGroupWarps = StagedGroups<kMT>::kWarps;
  const int group = warp / kGroupWarps, group_warp = warp % kGroupWarps;
  uint16_t* block = staged + group * kStagedElemsOf<kNT>;
  StagedGroups<kMT>::barrier(group);  // the group's reads of the previous tile are done
  stage_rows<T>(acc, block, group_warp * 16 * kMT, lane, p.relu);
  StagedGroups<kMT>::barrier(group);
  // Lane -> pixels lane and lane + 32 of the group; warp -> its share of the channels: all of
  // them stored unless the call has fewer channels (Problem::out_channels), a second loop then (a
  // guard in the one loop slows every 16-bit kernel: docs/perf-notes.md, "Other channel counts").
  uint16_t* out = static_cast<uint16_t*>(p.output);
  constexpr int kChannelsPerWarp = kNT * 8 / kGroupWarps;
  const int first = group_warp * kChannelsPerWarp;
  const int64_t channel_step = p.out_stride[1];
  const bool whole = p.out_channels >= first + kChannelsPerWarp;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t base = out_of(group * 64 + half * 32 + lane);
    if (base < 0) continue;
    const uint16_t* from = block + (half * 32 + lane) * kStagedPitchOf<kNT> + first;
    uint16_t* to = out + base + first * channel_step;
    if (whole) {
#pragma unroll 8
      for (int c = 0; c < kChannelsPerWarp; ++c) to[c * channel_step] = from[c];
    } else {
      for (int c = 0; c < p.out_channels - first; ++c) to[c * channel_step] = from[c];
    }
  }
}

}  // namespace cuda
}  // namespace alexconv
