// The tensor-core implicit GEMM: out[pixel][channel] = sum_k A[pixel][k] * B[k][channel],
// M = output pixels, N = 96, K = 3 x 121 (each channel padded to 128).
//
// A persistent grid of 512-thread CTAs walks the tiles of conv1_tiling.h. Per
// CTA, the packed weights of all three channels (B) stay in shared memory for the
// whole run. The warps then split into two roles that meet only at a ring of
// window slots (conv1_pipeline.cuh): 4 producer warps stage each (tile, input
// channel) window in a slot -- one TMA copy (Hopper; for float32 issued by a
// producer warp that does nothing else), cp.async units or registers,
// then converted into MMA operand words -- while 12 consumer warps multiply
// earlier stages. Each consumer warp owns 16 pixels x 96 channels; A fragments are
// gathered straight from the window (the im2col exists only in registers), and
// results leave as fp32 accumulators, which start every tile at the bias: straight
// to global memory for float32 outputs, through a shared-memory transpose for
// 16-bit ones.
//
// Two engines run the MMAs: warp-level mma.sync (sm_80+, the portable path) and,
// on Hopper, warpgroup wgmma (sm_90a), which reads B from shared memory itself and
// runs asynchronously while the next step's A fragments are gathered.
#include "conv1_launch.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../conv1_geometry.h"
#include "conv1_dtype.cuh"
#include "conv1_epilogue.cuh"
#include "conv1_mma.cuh"
#include "conv1_occupancy.cuh"
#include "conv1_pipeline.cuh"
#include "conv1_tiling.h"
#include "conv1_tma.h"
#include "conv1_weights.cuh"
#include "conv1_window.cuh"

namespace alexconv {
namespace cuda {
namespace {

constexpr int kSteps = 8;                    // 128 padded taps per channel / 16
using mma::kTapsPerChannel;
static_assert(kTapsPerChannel == kKernel * kKernel && kStride % 2 == 0 && kPad % 2 == 0,
              "the paired K order (conv1_mma.cuh) needs even window columns");


template <class Mode>
struct SmemLayout {
  using Word = typename Mode::Word;
  // B in either engine's layout (the two happen to need the same bytes).
  static constexpr size_t kBMmaSync = size_t(kInChannels) * kSteps * Mode::kChunks * 32 * sizeof(uint4);
  static constexpr size_t kBWgmma =
      size_t(kInChannels) * kSteps * Mode::kWgBlocks * wgmma::kBlockBytes;
  static constexpr size_t kB = kBMmaSync > kBWgmma ? kBMmaSync : kBWgmma;
  static constexpr size_t kKoffAt = kB;
  static constexpr size_t kBiasAt = kKoffAt + kSteps * 4 * sizeof(int4);
  static constexpr size_t kTapsAt = kBiasAt + kOutChannels * sizeof(float);
  static constexpr size_t kRingAt = kTapsAt + kSteps * 16;
  // TMA copies land at 128-byte aligned addresses: offsets are rounded here, and the
  // dynamic shared memory starts the CTA's window (these kernels have no static
  // shared memory). Declaring it __align__(128) instead changes the wgmma
  // descriptor arithmetic in SASS, so that is left for a build verified on a GPU.
  static constexpr size_t kSlotsAt = (kRingAt + sizeof(RingBarriers) + 127) / 128 * 128;
  static constexpr size_t kStagedAt = kSlotsAt + kStages * size_t(kSlotElems) * sizeof(Word);
  // 16-bit outputs leave through shared memory (see store_tile_staged); float32
  // modes have no room for that beside their two-part weights.
  static constexpr bool kStagedStores = sizeof(typename Mode::Raw) == 2;
  static constexpr size_t kTotal =
      kStagedAt + (kStagedStores ? kConsumerWarps / 4 * kStagedElems * sizeof(uint16_t) : 0);
  static_assert(kRingAt % 8 == 0 && kSlotElems * sizeof(Word) % 128 == 0,
                "barriers and slots stay aligned");
};

// Per-thread view of the tile being multiplied: for its m-tile(s) x 2 rows
// (pixels g and g+8), the offset into the window and into the output (-1: no pixel).
struct PixelRows {
  int window[kMTiles][2];
  int64_t out[kMTiles][2];
};

// Which tile pixel a thread's accumulator row (m-tile mt, half h, group g) is.
// mma.sync: each warp owns 16 consecutive pixels per m-tile. wgmma: each warpgroup
// owns 64 pixels per m-tile, warp w of the group holding rows 16w..16w+15.
template <bool kWgmma>
__device__ __forceinline__ int local_pixel(int warp, int mt, int h, int g) {
  if constexpr (kWgmma) return ((warp >> 2) * kMTiles + mt) * 64 + (warp & 3) * 16 + h * 8 + g;
  return (warp * kMTiles + mt) * 16 + h * 8 + g;
}

// Where strip-local pixel q of a tile lands in the output, and its row in the
// tile's window (in output rows from the tile's first).
struct PixelPlace {
  int64_t out;
  int oy_in_tile, x;
};
__device__ __forceinline__ PixelPlace place_pixel(const Tile& tile, const Problem& p, int q) {
  const int oy = tile.by_width.small(q), x = q - oy * int(tile.width);  // q <= kMaxIndex
  return {tile.n * p.out_stride[0] + oy * p.out_stride[2] + (tile.x0 + x) * p.out_stride[3],
          oy - int(tile.oy0), x};
}

template <bool kWgmma, int kElemBytes>
__device__ PixelRows pixel_rows(const Tile& tile, const TilePlan& plan, const Problem& p,
                                int warp, int g) {
  const int skew = window_skew(tile, kElemBytes);  // the window's column 0 in a slot row
  PixelRows r;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int local = local_pixel<kWgmma>(warp, mt, h, g);
      const int q = int(tile.q_begin) + local;
      r.window[mt][h] = 0;
      r.out[mt][h] = -1;
      if (local < plan.tile_pixels && q < tile.q_end) {
        const PixelPlace place = place_pixel(tile, p, q);
        r.window[mt][h] = int(place.oy_in_tile * kStride * plan.pitch + skew + place.x * kStride);
        r.out[mt][h] = place.out;
      }
    }
  }
  return r;
}

// The tap that col c (a k index, 0..15) of a step multiplies, in the K order of conv1_mma.cuh.
template <class Mode>
__device__ __forceinline__ int step_tap(int step, int c) {
  return mma::paired_tap(step * 8 + Mode::pair(c), Mode::member(c));
}

// Window slots 1 and 2 hold a channel's raw weights while B is packed (see
// pack_weights); stage 0's window copy is in flight meanwhile.
constexpr int kRawSlots = kStages - 1;

// Packs B (all channels), then the tap-offset table and the bias, while stage 0's
// window copies are in flight. `raw` is scratch for a channel's raw weights.
// Returns how this launch splits its inputs (toward zero where some weight is
// infinite: see mma::Round).
template <class Mode, DType T, bool kWgmma>
__device__ mma::Round prepare_constants(const Problem& p, int pitch, uint4* b_frag, int4* koff,
                                        float* bias, uint8_t* k_taps, typename Mode::Raw* raw,
                                        int tid) {
  using Raw = typename Mode::Raw;
  static_assert(kOutChannels * kTapsPerChannel * sizeof(Raw) <=
                    kRawSlots * kSlotElems * sizeof(typename Mode::Word),
                "a channel's raw weights fit in the free window slots");
  // The K order as a table: one shared-memory read per packed weight instead of its arithmetic.
  if (tid < kSteps * 16) k_taps[tid] = uint8_t(step_tap<Mode>(tid / 16, tid % 16));
  // pack_weights' loop, written out: through that function (inlined or not) ptxas
  // splits the __syncthreads_or below into one copy per warp role in 10 of these
  // kernels, the shape of build that hung (check_barriers.sh).
  WeightRound<Raw> weights;
  weights.load(p, 0, tid);
  bool infinite_weight = false;
#pragma unroll 1
  for (int c = 0; c < kInChannels; ++c) {
    weights.store(raw, tid);
    __syncthreads();  // the channel's raw weights (and, first, k_taps) are in place
    if (c + 1 < kInChannels) weights.load(p, c + 1, tid);  // in flight while packing
    infinite_weight |= pack_channel<Mode, kWgmma, kSteps>(raw, c, k_taps, b_frag, tid);
    __syncthreads();  // every read of the raw weights is done before the next store
  }
  if (tid < kSteps * 4) {
    const int step = tid >> 2, t = tid & 3;
    int off[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int tap = k_taps[step * 16 + Mode::col(t, j)];
      off[j] = tap < kTapsPerChannel ? (tap / kKernel) * pitch + tap % kKernel : 0;
    }
    koff[tid] = make_int4(off[0], off[1], off[2], off[3]);
  }
  if (tid < kOutChannels) {
    const Raw* b = static_cast<const Raw*>(p.bias);
    bias[tid] = b ? to_float<T>(b[tid * p.bias_stride]) : 0.f;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // B was written through the generic proxy; the tensor cores read it through the async proxy.
  // So were the raw weights in window slots that TMA copies will overwrite.
  fence_async_proxy();
#endif
  return __syncthreads_or(infinite_weight) ? mma::Round::kTowardZero : mma::Round::kNearest;
}

// The thread's A words of one step: pixel rows (g, g+8) of its m-tile(s) x 4 tap columns.
template <class Mode>
struct StepWords {
  typename Mode::Word x[kMTiles][2][4];
};

// A pair of adjacent window words, loaded as one (see the K order in conv1_mma.cuh).
template <class Word>
struct WordPair {
  using Vector = std::conditional_t<sizeof(Word) == 2, uint32_t, uint2>;
  __device__ static void load(const Word* at, Word& first, Word& second) {
    const Vector v = *reinterpret_cast<const Vector*>(at);
    if constexpr (sizeof(Word) == 2) {
      first = Word(v & 0xffffu);
      second = Word(v >> 16);
    } else {
      first = v.x;
      second = v.y;
    }
  }
};

// The step's words: pairs (cols j = 0, 1 and 2, 3 at k4.x and k4.z) in the
// paired steps, tap by tap in the last.
template <class Mode>
__device__ __forceinline__ void load_step(StepWords<Mode>& s, const typename Mode::Word* window,
                                          const PixelRows& rows, int4 k4, int step) {
  const int ko[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const typename Mode::Word* at = window + rows.window[mt][h];
      if (step < mma::kPairedSteps) {
#pragma unroll
        for (int j = 0; j < 4; j += 2) {
          WordPair<typename Mode::Word>::load(at + ko[j], s.x[mt][h][j], s.x[mt][h][j + 1]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) s.x[mt][h][j] = at[ko[j]];
      }
    }
}

// Padding taps sit in the last two steps only. Bit (step - kFirstPaddedStep) * 4 + j
// says the thread's col j is padding there; computed once per thread, so the K
// order's arithmetic stays out of the multiply loop.
constexpr int kFirstPaddedStep = mma::kAdjacentPairs / 8;
template <class Mode>
__device__ uint32_t padding_cols(int t) {
  uint32_t mask = 0;
  for (int step = kFirstPaddedStep; step < kSteps; ++step) {
    for (int j = 0; j < 4; ++j) {
      if (step_tap<Mode>(step, Mode::col(t, j)) >= kTapsPerChannel) {
        mask |= 1u << ((step - kFirstPaddedStep) * 4 + j);
      }
    }
  }
  return mask;
}

// The step's A fragments from its words. A is zeroed at padding taps (B is zero
// there too, but an input of inf would give NaN).
template <class Mode>
__device__ __forceinline__ void make_step_a(typename Mode::A (&a)[kMTiles], StepWords<Mode>& s,
                                            int step, uint32_t padding) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    if (step >= kFirstPaddedStep) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if ((padding >> ((step - kFirstPaddedStep) * 4 + j)) & 1) {
          s.x[mt][0][j] = typename Mode::Word(0);
          s.x[mt][1][j] = typename Mode::Word(0);
        }
      }
    }
    Mode::make_a(a[mt], s.x[mt]);
  }
}

// acc += A(window) * B(channel) over the channel's 8 steps. The next step's A
// words and the step after's tap offsets are loaded before this step's MMAs, so
// shared-memory latency overlaps tensor-core work.
template <class Mode>
__device__ __forceinline__ void multiply_channel(float (&acc)[kMTiles][mma::kNTiles][4],
                                                 const typename Mode::Word* window,
                                                 const uint4* b_channel, const int4* koff,
                                                 const PixelRows& rows, uint32_t padding,
                                                 int lane) {
  const int t = lane & 3;
  StepWords<Mode> cur, nxt;
  load_step<Mode>(cur, window, rows, koff[t], 0);
  int4 k_next = koff[4 + t];
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    if (step + 1 < kSteps) {
      load_step<Mode>(nxt, window, rows, k_next, step + 1);
      if (step + 2 < kSteps) k_next = koff[(step + 2) * 4 + t];
    }
    typename Mode::A a[kMTiles];
    make_step_a<Mode>(a, cur, step, padding);
    const uint4* b_step = b_channel + step * Mode::kChunks * 32 + lane;
#pragma unroll
    for (int chunk = 0; chunk < Mode::kChunks; ++chunk) {
      const uint4 b = b_step[chunk * 32];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) Mode::mma(acc[mt], chunk, a[mt], b);
    }
    if (step + 1 < kSteps) cur = nxt;
  }
}

// The wgmma version: each step's MMAs run asynchronously while the next step's
// A words are gathered. A fragments alternate between two register sets, and a
// step waits only for the step before it, whose set it will overwrite next.
template <class Mode>
__device__ __forceinline__ void multiply_channel_wgmma(float (&acc)[kMTiles][mma::kNTiles][4],
                                                       const typename Mode::Word* window,
                                                       uint32_t b_channel, const int4* koff,
                                                       const PixelRows& rows, uint32_t padding,
                                                       int lane) {
  const int t = lane & 3;
  StepWords<Mode> cur, nxt;
  load_step<Mode>(cur, window, rows, koff[t], 0);
  int4 k_next = koff[4 + t];
  typename Mode::A a[2][kMTiles];  // [step parity][m-tile]
  const wgmma::Operand weights = wgmma::blocks(b_channel);
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    if (step + 1 < kSteps) {
      load_step<Mode>(nxt, window, rows, k_next, step + 1);
      if (step + 2 < kSteps) k_next = koff[(step + 2) * 4 + t];
    }
    make_step_a<Mode>(a[step & 1], cur, step, padding);
    wgmma::fence();
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      Mode::wg_mma(acc[mt], a[step & 1][mt], weights, step * Mode::kWgBlocks * wgmma::kBlockUnits);
    }
    wgmma::commit();
    wgmma::wait<1>();
    if (step + 1 < kSteps) cur = nxt;
  }
  wgmma::wait<0>();
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) wgmma::fence_accumulators(acc[mt]);
}

// float32 TMA kernels give their copies a producer warp of their own (its first
// thread issues, and arrives on `full` for the whole warp); the other three convert.
// A copy then leaves as soon as the consumers free its slot, never behind a
// conversion, and the converters never wait on `empty`.
template <class Mode, Staging kStaging>
constexpr bool kCopyWarp = kStaging == Staging::kTma && sizeof(typename Mode::Raw) == 4;
constexpr int kCopyWarpIndex = kProducerWarps - 1;

// Producer warps: issues the copies of stage `at` (if there is one) into its slot
// -- one cp.async group, or one TMA copy by one producer thread -- and moves on to
// the next stage. `wait_for_slot`: the consumers may still be reading that slot
// (false only for the first use of each slot, in the kernel's prologue).
template <class Mode, Staging kStaging>
__device__ void issue_stage(const Problem& p, const void* window_map, const TilePlan& plan,
                            typename Mode::Word* slots, RingBarriers& ring, StageCursor<>& at,
                            RingPos<>& pos, bool wait_for_slot, int warp, int lane) {
  if constexpr (kStaging == Staging::kTma) {
    constexpr bool kOwnWarp = kCopyWarp<Mode, kStaging>;
    if (at.valid(plan) && warp == (kOwnWarp ? kCopyWarpIndex : 0) && lane == 0) {
      if (wait_for_slot) barrier_wait(&ring.empty[pos.slot], pos.phase ^ 1);
      issue_window_tma(slots + pos.slot * kSlotElems, window_map, plan, at.tile, at.channel,
                       &ring.landed[pos.slot]);
      if constexpr (kOwnWarp) barrier_arrive(&ring.full[pos.slot], 32);
    }
  } else {
    if (at.valid(plan)) {
      if (wait_for_slot) barrier_wait(&ring.empty[pos.slot], pos.phase ^ 1);
      issue_window_async<Mode, kStaging == Staging::kCopy16 ? 16 : 4>(
          slots + pos.slot * kSlotElems, p, at.tile, at.channel, int(plan.pitch), warp, lane);
    }
    copy_async_commit();  // possibly empty: one group per stage keeps the wait count fixed
  }
  at.advance(plan);
  pos.advance();
}

// Producer warps, fp32 and aligned 16-bit windows: copies run one stage ahead of
// conversion. The first kStages - 1 stages were issued by the kernel's prologue.
template <class Mode, Staging kStaging>
__device__ void produce_async(const Problem& p, const void* window_map, const TilePlan& plan,
                              typename Mode::Word* slots, RingBarriers& ring, StageCursor<>& copy_at,
                              RingPos<>& copy_pos, mma::Round round, int warp, int lane) {
  constexpr bool kTma = kStaging == Staging::kTma;
  constexpr bool kOwnWarp = kCopyWarp<Mode, kStaging>;
  constexpr int kConverters = kOwnWarp ? kProducerThreads - 32 : kProducerThreads;
  if constexpr (kOwnWarp) {
    if (warp == kCopyWarpIndex) {
      if (lane == 0) {
        while (copy_at.valid(plan)) {
          issue_stage<Mode, kStaging>(p, window_map, plan, slots, ring, copy_at, copy_pos, true,
                                      warp, lane);
        }
      }
      return;
    }
  }
  const int pitch = int(plan.pitch);
  StageCursor<> convert_at(plan);
  RingPos<> convert_pos;
  while (convert_at.valid(plan)) {
    typename Mode::Word* slot = slots + convert_pos.slot * kSlotElems;
    if constexpr (kTma) {
      barrier_wait(&ring.landed[convert_pos.slot], convert_pos.phase);
    } else {
      copy_async_wait<kStages - 2>();  // this thread's copies of convert_at's window landed
      // Any producer converts any unit: all of them wait for the others' copies.
      if constexpr (sizeof(typename Mode::Raw) == 4) producer_barrier();
    }
    convert_window<Mode, kConverters>(slot, convert_at.tile, pitch, warp, lane, round);
    // A later TMA copy overwrites what the conversion wrote.
    if constexpr (kTma && sizeof(typename Mode::Raw) == 4) fence_async_proxy();
    barrier_arrive(&ring.full[convert_pos.slot]);
    convert_at.advance(plan);
    convert_pos.advance();
    if constexpr (!kOwnWarp) {
      issue_stage<Mode, kStaging>(p, window_map, plan, slots, ring, copy_at, copy_pos, true, warp,
                                  lane);
    }
  }
}

// Producer warps, other 16-bit windows: element loads through registers; the
// loads of a stage are in flight while its slot is still being read.
template <class Mode>
__device__ void produce_registers(const Problem& p, const TilePlan& plan,
                                  typename Mode::Word* slots, RingBarriers& ring,
                                  mma::Round round, int warp, int lane) {
  typename Mode::Raw regs[kLoadsPerThread];
  StageCursor<> at(plan);
  RingPos<> pos;
  while (at.valid(plan)) {
    load_window<Mode>(regs, p, at.tile, at.channel, warp, lane);
    barrier_wait(&ring.empty[pos.slot], pos.phase ^ 1);
    store_window<Mode>(slots + pos.slot * kSlotElems, regs, at.tile, int(plan.pitch), warp, lane,
                       round);
    barrier_arrive(&ring.full[pos.slot]);
    at.advance(plan);
    pos.advance();
  }
}

// Consumer warps: per stage, multiply the slot's window by the channel's B;
// after a tile's last channel, store (the accumulators began at the bias).
template <class Mode, DType T, bool kWgmma>
__device__ void consume(const Problem& p, const TilePlan& plan, const typename Mode::Word* slots,
                        RingBarriers& ring, const uint4* b_frag, const int4* koff,
                        const float* bias, uint16_t* staged, int warp, int lane) {
  StageCursor<> at(plan);
  RingPos<> pos;
  PixelRows rows = pixel_rows<kWgmma, sizeof(typename Mode::Raw)>(at.tile, plan, p, warp, lane >> 2);
  float acc[kMTiles][mma::kNTiles][4];
  init_accumulators(acc, bias, lane & 3);
  const uint32_t padding = padding_cols<Mode>(lane & 3);
  while (at.valid(plan)) {
    barrier_wait(&ring.full[pos.slot], pos.phase);
    __syncwarp();  // the warp-collective MMAs need the whole warp back together
    const typename Mode::Word* window = slots + pos.slot * kSlotElems;
    if constexpr (kWgmma) {
      // The channel's B address, the same in every lane, read from lane 0: ptxas then
      // knows it is warp-uniform and builds each wgmma's descriptor in uniform
      // registers (otherwise two R2UR moves per wgmma, 48 of a channel's ~386
      // instructions in fp32).
      const uint32_t b_channel = __shfl_sync(
          0xffffffffu,
          smem_address(b_frag) + at.channel * kSteps * Mode::kWgBlocks * wgmma::kBlockBytes, 0);
      multiply_channel_wgmma<Mode>(acc, window, b_channel, koff, rows, padding, lane);
    } else {
      multiply_channel<Mode>(acc, window, b_frag + at.channel * kSteps * Mode::kChunks * 32, koff,
                             rows, padding, lane);
    }
    barrier_arrive(&ring.empty[pos.slot]);
    pos.advance();
    if (at.channel == kInChannels - 1) {
      if constexpr (SmemLayout<Mode>::kStagedStores) {
        store_tile_staged<T>(acc, staged, p, warp, lane, p.out_pixel_major, [&](int local) -> int64_t {
          const int q = int(at.tile.q_begin) + local;
          if (local >= plan.tile_pixels || q >= at.tile.q_end) return -1;
          return place_pixel(at.tile, p, q).out;
        });
      } else {
        store_tile(acc, rows.out, p, lane & 3, p.out_pixel_major);
      }
      init_accumulators(acc, bias, lane & 3);
    }
    if (at.advance(plan)) {
      rows = pixel_rows<kWgmma, sizeof(typename Mode::Raw)>(at.tile, plan, p, warp, lane >> 2);
    }
  }
}

template <class Mode, DType T, bool kWgmma, Staging kStaging>
__global__ void __launch_bounds__(kTileThreads, 1)
    conv1_igemm_kernel(const Problem p, const TilePlan plan,
                       const __grid_constant__ WindowMap window_map) {
  using Word = typename Mode::Word;
  constexpr bool kAsync = kStaging != Staging::kRegisters;
  using Layout = SmemLayout<Mode>;
  static_assert(std::is_same_v<typename Mode::Raw, typename Storage<T>::type>, "mode matches dtype");
  static_assert(kAsync || sizeof(typename Mode::Raw) == 2, "float32 always takes cp.async");
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* b_frag = reinterpret_cast<uint4*>(smem);
  int4* koff = reinterpret_cast<int4*>(smem + Layout::kKoffAt);
  float* bias = reinterpret_cast<float*>(smem + Layout::kBiasAt);
  uint8_t* k_taps = smem + Layout::kTapsAt;
  RingBarriers& ring = *reinterpret_cast<RingBarriers*>(smem + Layout::kRingAt);
  Word* slots = reinterpret_cast<Word*>(smem + Layout::kSlotsAt);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const bool producer = warp >= kConsumerWarps;
  const int producer_warp = warp - kConsumerWarps;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrier_init(&ring.full[s], kProducerThreads);
      barrier_init(&ring.empty[s], kConsumerThreads);
      barrier_init(&ring.landed[s], 1);
    }
    barrier_init_fence();
  }
  __syncthreads();  // the ring exists before a first TMA copy names one of its barriers
  // Stage 0's window travels while B is packed; slots 1 and 2 hold raw weights
  // meanwhile, so stage 1's window is issued after it and stage 2's by the producer
  // loop (every stage up to kStages - 2 before the loop starts).
  StageCursor<> copy_at(plan);
  RingPos<> copy_pos;
  const auto issue_first_stages = [&](int count) {
    if constexpr (kAsync) {
      for (int s = 0; s < count && producer; ++s) {
        issue_stage<Mode, kStaging>(p, &window_map, plan, slots, ring, copy_at, copy_pos, false,
                                    producer_warp, lane);
      }
    }
  };
  issue_first_stages(kStages - kRawSlots);
  // Ends in a CTA barrier.
  const mma::Round input_round =
      prepare_constants<Mode, T, kWgmma>(p, int(plan.pitch), b_frag, koff, bias, k_taps,
                                         reinterpret_cast<typename Mode::Raw*>(
                                             slots + (kStages - kRawSlots) * kSlotElems),
                                         tid);
  issue_first_stages(kRawSlots - 1);
  if (!producer) {
    consume<Mode, T, kWgmma>(p, plan, slots, ring, b_frag, koff, bias,
                             reinterpret_cast<uint16_t*>(smem + Layout::kStagedAt), warp, lane);
  } else if constexpr (kAsync) {
    produce_async<Mode, kStaging>(p, &window_map, plan, slots, ring, copy_at, copy_pos,
                                  input_round, producer_warp, lane);
  } else {
    produce_registers<Mode>(p, plan, slots, ring, input_round, producer_warp, lane);
  }
}

// Which staging the input's strides and alignment allow (see Staging).
template <class Mode>
Staging choose_staging(const Problem& p) {
  const auto rows_aligned_to = [&](int64_t elems) {
    return p.in_stride[3] == 1 &&
           reinterpret_cast<uintptr_t>(p.input) % (elems * sizeof(typename Mode::Raw)) == 0 &&
           p.in_stride[0] % elems == 0 && p.in_stride[1] % elems == 0 &&
           p.in_stride[2] % elems == 0;
  };
  constexpr int64_t kPerCopy16 = kCopyBytes / sizeof(typename Mode::Raw);
  if (rows_aligned_to(kPerCopy16)) return Staging::kCopy16;
  // 4-byte units: any float32 element; 16-bit elements only as aligned pairs.
  if (sizeof(typename Mode::Raw) == 4 || rows_aligned_to(2)) return Staging::kCopy4;
  return Staging::kRegisters;
}

// Turns `plan` into a TMA plan with `map` describing the input, every window
// copied as one window_box (conv1_tiling.h). Returns false where TMA cannot take
// this input (no box fits, or the driver rejects the strides), which then stays
// on 16-byte cp.async units.
template <class Mode>
bool make_tma_plan(const Problem& p, TilePlan& plan, WindowMap& map) {
#if defined(ALEXCONV_BUILT_FOR_SM90A)
  const WindowBox window = window_box(plan, int(sizeof(typename Mode::Raw)));
  if (window.cols == 0 || !encode_window_map(p, window.cols, window.rows, map)) return false;
  plan.pitch = window.cols;
  plan.box_rows = window.rows;
  return true;
#else
  (void)p, (void)plan, (void)map;
  return false;
#endif
}

template <class Mode, DType T, bool kWgmma, Staging kStaging>
cudaError_t launch_kernel(const Problem& p, const TilePlan& plan, const WindowMap& window_map,
                          const DeviceInfo& device, cudaStream_t stream) {
  constexpr auto kernel = conv1_igemm_kernel<Mode, T, kWgmma, kStaging>;
  const size_t smem = SmemLayout<Mode>::kTotal;
  int per_sm = 0;
  const cudaError_t err = resident_ctas_per_sm<kernel>(smem, kTileThreads, per_sm);
  if (err != cudaSuccess) return err;
  const int64_t grid = std::min<int64_t>(plan.tiles, int64_t(per_sm) * device.sm_count);
  TilePlan ordered = plan;
  if (plan.strips > 1 && plan.tiles >= kMinTurnsForRuns * grid) {
    ordered.order = contiguous_runs(plan.tiles, grid);
  }
  kernel<<<unsigned(grid), kTileThreads, smem, stream>>>(p, ordered, window_map);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

template <class Mode, DType T, bool kWgmma>
cudaError_t launch_engine(const Problem& p, const TilePlan& plan, const DeviceInfo& device,
                          cudaStream_t stream) {
  const Staging staging = choose_staging<Mode>(p);
  WindowMap map{};  // read by TMA kernels only
  if constexpr (kWgmma) {  // TMA and wgmma arrive together, with Hopper
    TilePlan tma_plan = plan;
    if (staging == Staging::kCopy16 && make_tma_plan<Mode>(p, tma_plan, map)) {
      return launch_kernel<Mode, T, kWgmma, Staging::kTma>(p, tma_plan, map, device, stream);
    }
  }
  switch (staging) {
    case Staging::kCopy16:
      return launch_kernel<Mode, T, kWgmma, Staging::kCopy16>(p, plan, map, device, stream);
    case Staging::kCopy4:
      return launch_kernel<Mode, T, kWgmma, Staging::kCopy4>(p, plan, map, device, stream);
    case Staging::kRegisters:
      if constexpr (sizeof(typename Mode::Raw) == 2) {
        return launch_kernel<Mode, T, kWgmma, Staging::kRegisters>(p, plan, map, device, stream);
      }
      break;
    case Staging::kTma: break;  // chosen above, never by choose_staging
  }
  return cudaErrorInvalidValue;
}

template <class Mode, DType T>
cudaError_t launch_typed(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  const TilePlan plan = make_tile_plan(p.batch, p.out_h, p.out_w, device.sm_count);  // 1 CTA/SM
  if (plan.strips == 0) return cudaErrorInvalidValue;  // callers ask igemm_supported first
  if (plan.tiles == 0) return cudaSuccess;
  return device.allow_wgmma && wgmma_available(device)
             ? launch_engine<Mode, T, true>(p, plan, device, stream)
             : launch_engine<Mode, T, false>(p, plan, device, stream);
}

template <class Mode>
WindowStaging window_staging(const Problem& p, const DeviceInfo& device) {
  const Staging staging = choose_staging<Mode>(p);
  if (staging == Staging::kRegisters) return WindowStaging::kRegisters;
  if (staging == Staging::kCopy4) return WindowStaging::kCopy4;
  // As launch_engine decides (a box that fits; the driver's encoding is not tried here).
  if (staging == Staging::kCopy16 && device.allow_wgmma && wgmma_available(device)) {
    const TilePlan plan = make_tile_plan(p.batch, p.out_h, p.out_w, device.sm_count);
    if (plan.tiles > 0 && window_box(plan, int(sizeof(typename Mode::Raw))).cols > 0) {
      return WindowStaging::kTma;
    }
  }
  return WindowStaging::kCopy16;
}

size_t igemm_smem_bytes(const Problem& p) {
  switch (p.dtype) {
    case DType::kFloat32:
      return p.allow_tf32 ? SmemLayout<mma::Tf32>::kTotal : SmemLayout<mma::Bf16x3>::kTotal;
    case DType::kFloat16: return SmemLayout<mma::Half<false>>::kTotal;
    case DType::kBFloat16: return SmemLayout<mma::Half<true>>::kTotal;
  }
  return ~size_t(0);
}

}  // namespace

// wgmma code exists only where CMake built the kernels for sm_90a.
bool wgmma_available(const DeviceInfo& device) {
#if defined(ALEXCONV_BUILT_FOR_SM90A)
  return device.major == 9 && device.minor == 0;
#else
  (void)device;
  return false;
#endif
}

WindowStaging igemm_window_staging(const Problem& p, const DeviceInfo& device) {
  switch (p.dtype) {
    case DType::kFloat32: return window_staging<mma::Bf16x3>(p, device);
    case DType::kFloat16: return window_staging<mma::Half<false>>(p, device);
    case DType::kBFloat16: return window_staging<mma::Half<true>>(p, device);
  }
  return WindowStaging::kCopy16;
}

bool igemm_supported(const Problem& p, const DeviceInfo& device) {
  return device.major >= 8 && igemm_smem_bytes(p) <= device.max_smem_per_block_optin &&
         make_tile_plan(p.batch, p.out_h, p.out_w, device.sm_count).strips > 0;
}

cudaError_t launch_conv1_igemm(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat32:
      return p.allow_tf32 ? launch_typed<mma::Tf32, DType::kFloat32>(p, device, stream)
                          : launch_typed<mma::Bf16x3, DType::kFloat32>(p, device, stream);
    case DType::kFloat16: return launch_typed<mma::Half<false>, DType::kFloat16>(p, device, stream);
    case DType::kBFloat16: return launch_typed<mma::Half<true>, DType::kBFloat16>(p, device, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace alexconv
