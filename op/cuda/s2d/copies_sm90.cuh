// How a stage's window reaches the space-to-depth producers through the copy engine
// (s2d/producers.cuh, produce_copied): one thread issues a copy of a (tile,
// channel) window into a raw slot, and every producer reads its units' 2 x 4 elements
// back as records. Two sources:
// - BoxCopies: a TMA box, dense rows of box_cols elements, zeros outside the input.
//   Needs every row stride a multiple of 16 bytes (224, 256, 512).
// - SpanCopies: wherever no box applies (227: 454-byte fp16 rows TMA cannot cut; tiny
//   images whose boxes are too tall) and the window's rows fit a raw slot. A window's
//   rows lie in one range of memory from its first element to its last: one 1-D bulk
//   copy lands the range as it lies (pitch = the row stride), read back at 2-byte
//   alignment with what lies outside the window or the input masked. For channels_last
//   inputs one copy per tile lands all three channels' windows, interleaved as they
//   lie, and serves the tile's three stages.
#pragma once

#include <cstdint>

#include "../../conv1_geometry.h"
#include "../arch/global_loads.cuh"
#include "../arch/mbarrier.cuh"
#include "../arch/smem.cuh"
#include "../arch/tma.cuh"
#include "../common/operand_modes.cuh"
#include "../common/ring.cuh"
#include "../common/tma_map.h"
#include "../kernel_api.h"
#include "plan.h"
#include "ring.cuh"

namespace alexconv {
namespace cuda {
namespace s2d {

// Elements per 16 bytes, the copy engine's unit of alignment.
template <class Raw>
constexpr int kPerUnit = 16 / int(sizeof(Raw));

// A unit's two rows of 4 float32 elements (multiplied as fp16) as a record: rounded to
// fp16 pairs, their bits ORed into float_bits (HalfMagnitudes).
__device__ __forceinline__ uint4 pack_record(const float (&f)[kUnitValues], uint32_t& float_bits) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float_bits |= __float_as_uint(f[2 * i]) | __float_as_uint(f[2 * i + 1]);
    w[i] = mma::pack_half2(f[2 * i], f[2 * i + 1]);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <class Raw>
struct BoxCopies {
  static constexpr int kStagesPerCopy = 1;
  const WindowMap* map;
  int row_bytes;  // box_cols elements

  // The first input column of a tile's box, 16-byte aligned (the hardware needs it),
  // and how far into each box row the window's column 0 sits.
  __device__ static int skew(const Tile& tile) {
    return int((tile.ix0() % kPerUnit<Raw> + kPerUnit<Raw>) % kPerUnit<Raw>);
  }
  // What a producer thread keeps per unit (in shared memory): its first element's
  // offset from the window's (0, 0).
  __device__ uint32_t unit_key(const Unit& unit) const {
    return uint32_t(unit.row * row_bytes + unit.col * int(sizeof(Raw)));
  }
  __device__ void issue(unsigned char* raw, const Problem&, const Plan& plan, const Tile& tile,
                        int channel, uint64_t* landed) const {
    barrier_arrive_expect_bytes(landed, uint32_t(plan.box_rows * plan.box_cols * sizeof(Raw)));
    const int x = int(tile.ix0()) - skew(tile), y = int(tile.iy0());
    if (plan.box_in_units) {
      tma_load_box_in_units(smem_address(raw), map, x / kPerUnit<Raw>, y, channel, int(tile.n), landed);
    } else {
      tma_load_box(smem_address(raw), map, x, y, channel, int(tile.n), landed);
    }
  }

  // Where a stage's window (0, 0) lies in its raw slot.
  struct Stage {
    const unsigned char* origin;
  };
  __device__ Stage stage(const unsigned char* raw, const Problem&, const Tile& tile, int) const {
    return {raw + skew(tile) * int(sizeof(Raw))};
  }
  // 16-bit: four aligned 32-bit loads. float32: four aligned 8-byte loads (a float32
  // box row's window starts 0 or 8 bytes into a 16-byte unit: even paddings, tma_box). No
  // bound checks: the copy engine zero-filled what lies outside the input.
  __device__ uint4 record(const Stage& s, uint32_t key, const Problem&, uint32_t& float_bits) const {
    const unsigned char* first = s.origin + key;
    if constexpr (sizeof(Raw) == 4) {
      const float2* row0 = reinterpret_cast<const float2*>(first);
      const float2* row1 = reinterpret_cast<const float2*>(first + row_bytes);
      const float2 a = row0[0], b = row0[1], c = row1[0], d = row1[1];
      const float f[kUnitValues] = {a.x, a.y, b.x, b.y, c.x, c.y, d.x, d.y};
      return pack_record(f, float_bits);
    } else {
      const uint32_t* row0 = reinterpret_cast<const uint32_t*>(first);
      const uint32_t* row1 = reinterpret_cast<const uint32_t*>(first + row_bytes);
      return make_uint4(row0[0], row0[1], row1[0], row1[1]);
    }
  }
};

// Row spans. The window's element (r, c) -- input (row0 + r, col0 + c), row0 and col0
// the window's first row and column, 2 before the first cell's -- lands at byte
// 16 + origin % 16 + (r * row stride + c * column stride) * size of an element,
// origin being where that element (0, 0) would lie in memory: the copy's 16-byte
// alignment is the memory's. The host (make_span_plan in s2d.cu) has checked that
// the farthest read stays in the slot, and that the input starts 16-byte aligned:
// aligning a window's first byte down never leaves the input.
//
// kAllChannels: channels_last inputs, whose pixels hold their three channels side by
// side (column stride 3, channel stride 1). A window's rows then lie in one range for
// all three channels: one copy per tile lands the three channels' windows, interleaved,
// and serves the tile's three stages.
template <class Raw, bool kAllChannels = false>
struct SpanCopies {
  static constexpr int kElem = int(sizeof(Raw));
  static constexpr int kStagesPerCopy = kAllChannels ? kInChannels : 1;
  static constexpr int kColumnStride = kAllChannels ? kInChannels : 1;  // elements
  int pitch_bytes;  // the row stride (in_stride[2])

  // Where `origin` lands in the slot; 32-bit arithmetic keeps its low bits. The 16 is
  // headroom, not a need: a copy starts at or after `origin` rounded down to 16 bytes,
  // so origin % 16 alone would keep it in the slot (make_span_plan counts the 16).
  __device__ static int landing(const Problem& p, const Tile& tile, int channel) {
    const int row0 = int(tile.iy0()), col0 = int(tile.ix0());
    const uint32_t element = uint32_t(tile.n) * uint32_t(p.in_stride[0]) +
                             uint32_t(kAllChannels ? 0 : channel) * uint32_t(p.in_stride[1]) +
                             uint32_t(row0) * uint32_t(p.in_stride[2]) + uint32_t(col0 * kColumnStride);
    return 16 + int((uint32_t(reinterpret_cast<uintptr_t>(p.input)) + element * kElem) & 15u);
  }
  // Per unit: its row and column in the window (the masks need them), 16 bits each.
  __device__ uint32_t unit_key(const Unit& unit) const {
    return uint32_t(unit.row) << 16 | uint32_t(unit.col);
  }
  // The window's rows and columns inside the input, copied as the range from the first
  // one's first byte to the last one's last, both ends rounded out to 16 bytes -- but
  // never past plan.span_end, the input's last 16-byte boundary (the memory after it
  // may not be the input's): the elements between it and the range's end are loaded
  // and stored by this thread, before its arrival publishes them. `channel` is the
  // stage's (kAllChannels: the tile's first, 0).
  struct Range {
    int64_t origin = 0;  // where the window's (0, 0) would lie
    int64_t from = 0, to = 0, end = 0;  // the copy [from, to), the elements up to end
  };
  __device__ Range range(const Problem& p, const Plan& plan, const Tile& tile, int channel) const {
    Range r;
    const int64_t row0 = tile.iy0(), col0 = tile.ix0();
    const int64_t r0 = max(row0, int64_t(0)), r1 = min(row0 + plan.box_rows, p.in_h) - 1;
    const int64_t c0 = max(col0, int64_t(0)), c1 = min(col0 + kStride * plan.wv, p.in_w) - 1;
    if (r0 <= r1 && c0 <= c1) {
      const int64_t plane = int64_t(reinterpret_cast<uintptr_t>(p.input)) +
                            kElem * (tile.n * p.in_stride[0] + channel * p.in_stride[1]);
      r.origin = plane + kElem * (row0 * p.in_stride[2] + col0 * kColumnStride);
      const int64_t first = plane + kElem * (r0 * p.in_stride[2] + c0 * kColumnStride);
      r.end = plane + kElem * (r1 * p.in_stride[2] + (c1 + 1) * kColumnStride);
      r.from = first & ~int64_t(15);
      r.to = max(r.from, min((r.end + 15) & ~int64_t(15), plan.span_end));
    }
    return r;
  }
  __device__ void issue(unsigned char* raw, const Problem& p, const Plan& plan, const Tile& tile,
                        int channel, uint64_t* landed) const {
    const Range r = range(p, plan, tile, channel);
    unsigned char* at = raw + landing(p, tile, channel) + (r.from - r.origin);
    for (int64_t q = r.to; q < r.end; q += kElem) {
      *reinterpret_cast<Raw*>(at + (q - r.from)) = load_or_zero(reinterpret_cast<const Raw*>(q), true);
    }
    const uint32_t bytes = uint32_t(r.to - r.from);
    barrier_arrive_expect_bytes(landed, bytes);
    if (bytes > 0) bulk_copy(smem_address(at), reinterpret_cast<const void*>(r.from), bytes, landed);
  }
  // A tile's copy (kAllChannels) has one slot and goes out only once the tile before it
  // is staged; its bytes, asked into L2 a tile ahead, then come from L2.
  __device__ void prefetch(const Problem& p, const Plan& plan, const Tile& tile) const {
    const Range r = range(p, plan, tile, 0);
    if (r.to > r.from) bulk_prefetch_l2(reinterpret_cast<const void*>(r.from), uint32_t(r.to - r.from));
  }

  struct Stage {
    const unsigned char* raw;  // the slot (16-byte aligned)
    int origin;                // the stage channel's window (0, 0) in it
    int row0, col0;            // its input coordinates
  };
  __device__ Stage stage(const unsigned char* raw, const Problem& p, const Tile& tile, int channel) const {
    const int origin = landing(p, tile, channel) + (kAllChannels ? channel * kElem : 0);
    return {raw, origin, int(tile.iy0()), int(tile.ix0())};
  }
  // Masks: rows and columns outside the input read bytes of other rows (or none the
  // copy wrote) and become 0, as a box's zero fill. 16-bit rows are 2-byte aligned:
  // three aligned words and two funnel shifts each, or with interleaved channels one
  // 16-bit load per element (6 bytes apart). float32: 8 aligned loads.
  __device__ uint4 record(const Stage& s, uint32_t key, const Problem& p, uint32_t& float_bits) const {
    const int row = int(key >> 16), col = int(key & 0xffffu);
    const int iy = s.row0 + row, ix = s.col0 + col;
    const unsigned height = unsigned(p.in_h), width = unsigned(p.in_w);
    // Offsets within the slot, whose alignment is the bytes' own: the pointer arithmetic
    // stays on the slot pointer, so the loads stay shared-memory loads.
    const int first = s.origin + row * pitch_bytes + col * kColumnStride * kElem;
    bool col_ok[4];
#pragma unroll
    for (int rx = 0; rx < 4; ++rx) col_ok[rx] = unsigned(ix + rx) < width;
    if constexpr (kElem == 4) {
      float f[kUnitValues];
#pragma unroll
      for (int ry = 0; ry < 2; ++ry) {
        const float* r = reinterpret_cast<const float*>(s.raw + first + ry * pitch_bytes);
        const bool row_ok = unsigned(iy + ry) < height;
#pragma unroll
        for (int rx = 0; rx < 4; ++rx) f[ry * 4 + rx] = row_ok && col_ok[rx] ? r[rx * kColumnStride] : 0.f;
      }
      return pack_record(f, float_bits);
    } else {
      const uint32_t lo = (col_ok[0] ? 0xffffu : 0u) | (col_ok[1] ? 0xffff0000u : 0u);
      const uint32_t hi = (col_ok[2] ? 0xffffu : 0u) | (col_ok[3] ? 0xffff0000u : 0u);
      uint32_t w[4];
#pragma unroll
      for (int ry = 0; ry < 2; ++ry) {
        const int at = first + ry * pitch_bytes;
        const uint32_t row_mask = unsigned(iy + ry) < height ? 0xffffffffu : 0u;
        if constexpr (kAllChannels) {
          const uint16_t* e = reinterpret_cast<const uint16_t*>(s.raw + at);
          w[2 * ry] = (uint32_t(e[0]) | uint32_t(e[kColumnStride]) << 16) & lo & row_mask;
          w[2 * ry + 1] = (uint32_t(e[2 * kColumnStride]) | uint32_t(e[3 * kColumnStride]) << 16) & hi & row_mask;
        } else {
          const uint32_t* words = reinterpret_cast<const uint32_t*>(s.raw + (at & ~3));
          const uint32_t shift = uint32_t(at & 2) * 8;
          const uint32_t w0 = words[0], w1 = words[1], w2 = words[2];
          w[2 * ry] = __funnelshift_r(w0, w1, shift) & lo & row_mask;
          w[2 * ry + 1] = __funnelshift_r(w1, w2, shift) & hi & row_mask;
        }
      }
      return make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
};

}  // namespace s2d
}  // namespace cuda
}  // namespace alexconv
