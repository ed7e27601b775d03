// The space-to-depth implicit GEMM (Hopper, sm_90a): both wgmma operands come
// straight from shared memory, so the consumer warps issue MMAs and nothing else.
//
// s2d/plan.h folds the stride into 16 phases per input channel, making the
// layer a 3x3 stride-1 convolution (K = 3 channels x 9 taps x 16 phases = 432, of
// which 363 are real taps). Per (tile, input channel) stage the producer warps stage
// the tile's window of cells as planes of 16-byte records -- a record is one cell's
// 8 phases of 16-bit operands (two phase rows of 4; bf16x3 keeps hi and lo planes)
// -- and a tap's A operand for 64 consecutive pixels is then 64 consecutive records,
// exactly a K-major run of 8 core matrices (arch/wgmma.cuh). B (all channels and
// taps, packed once per CTA) stays resident. Per stage a warpgroup issues 9 taps x
// 1 (fp16/bf16, and float32 with allow_tf32, multiplied as fp16) or 3 (bf16x3,
// float32-accurate) wgmmas.
//
// The zero-weight taps (ky or kx = 11) multiply real input cells of the
// neighbouring pixels. A zero weight times an Inf or NaN input is NaN where
// F.conv2d has none, so for a tile whose windows hold any non-finite input the
// consumers skip their stores and the producers store it value by value
// (direct/direct.cuh): exact, and only for such tiles. float32 multiplied as fp16
// sends the tiles fp16's range cannot hold the same way (see TileVotes).
//
// The parts: s2d/ring.cuh (slots, barriers, pixels), s2d/producers.cuh,
// s2d/consumers_sm90.cuh; this file holds the kernel, its shared-memory layout and
// register split, and the launch.
#include "../launch_plan.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../arch/mbarrier.cuh"
#include "../arch/setmaxnreg.cuh"
#include "../arch/smem.cuh"
#include "../arch/tma.cuh"
#include "../common/dtype.cuh"
#include "../common/occupancy.h"
#include "../common/operand_modes.cuh"
#include "../common/ring.cuh"
#include "../common/tile_order.h"  // Divider, strip_columns, kMaxIndex
#include "../common/tma_map.h"
#include "../common/warp_roles.h"
#include "../common/weight_packing.cuh"
#include "consumers_sm90.cuh"
#include "copies_sm90.cuh"
#include "plan.h"
#include "producers.cuh"
#include "prologue.cuh"
#include "ring.cuh"

namespace alexconv {
namespace cuda {
namespace s2d {
namespace {

// How the producers stage a window (cuda::Staging): element loads through registers (kLoads),
// or a copy into a raw slot (s2d/copies_sm90.cuh) -- a TMA box (kTma), a row span where rows are
// not 16-byte aligned (kSpans), or for channels_last inputs a row span of a tile's three
// channels at once (kPixelSpans).

// Where the consumers run two accumulator sets (consume_overlapped), setmaxnreg
// moving registers from the producers (80) to them (144). Chosen per kernel by
// same-call A/B runs (docs/perf-notes.md, "The measurements behind the code's choices"):
// - Staging through the copy engine (boxes, spans): the producers hold no loads in
//   registers.
// - 16-bit element loads, up to 7 units per producer thread: faster.
// - float32 multiplied as fp16, element loads of 7 units (256, 512): faster than one set
//   or another split. Its 6-unit kernel stays at one set: either split made 227 and
//   channels_last 224 slower.
// - Elsewhere one set, 128 registers each (the launch bound): 8 units (two sets not
//   measured), and bf16x3, slower with two sets (its two slots let the producers run only
//   one stage ahead of an overlapped epilogue).
template <class Mode, Staging kStaging, int kUnits>
struct RegisterSplit {
  static constexpr bool kHalfMode =
      std::is_same_v<Mode, mma::Half<false>> || std::is_same_v<Mode, mma::Half<true>>;
  static constexpr bool kOverlap =
      kStaging != Staging::kLoads || (kHalfMode && kUnits < kMaxUnitsPerThread) ||
      (std::is_same_v<Mode, mma::Float32AsHalf> && kUnits == kMaxUnitsPerThread - 1);
  static constexpr int kConsumer = 144;
  static constexpr int kProducer = (65536 - kConsumerThreads * kConsumer) / kProducerThreads;
  static_assert(kProducer % 8 == 0, "setmaxnreg counts are multiples of 8");
};

// Raw slots (modes with any): two of a (tile, channel) window each, one landing while
// the other is read; for a tile's three interleaved windows (kPixelSpans) one, as large
// as what the rest leaves of kSmemHopper (41600 bytes beside 16-bit operands,
// 79232 beside float32 multiplied as fp16).
template <class Mode, Staging kStaging>
struct SmemLayout {
  static constexpr size_t kB = size_t(kInChannels) * kTapSteps * Mode::kWgBlocks * wgmma::kBlockBytes;
  static constexpr size_t kTapsAt = kB;
  static constexpr size_t kBiasAt = kTapsAt + kTapSteps * 16;
  static constexpr size_t kRingAt = kBiasAt + kOutChannels * sizeof(float);
  static constexpr size_t kSlotsAt = (kRingAt + sizeof(Ring<Staged<Mode>::kSlots>) + 127) / 128 * 128;
  static constexpr size_t kRawAt = kSlotsAt + size_t(Staged<Mode>::kSlots) * Staged<Mode>::kSlotBytes;
  static constexpr size_t kStagedBytes =
      Staged<Mode>::kHalfOutputs ? kConsumerWarps / 4 * kStagedElems * sizeof(uint16_t) : 0;
  // Staging through the copy engine: each producer thread's unit keys (produce_copied).
  static constexpr size_t kUnitKeysBytes =
      Staged<Mode>::kRawSlots > 0 ? kMaxUnitsPerThread * kProducerThreads * sizeof(uint32_t) : 0;
  static constexpr bool kTileCopies = kStaging == Staging::kPixelSpans;
  static constexpr int kRawSlots = kTileCopies ? 1 : Staged<Mode>::kRawSlots;
  static constexpr int kRawSlotBytes =
      kTileCopies ? int((kSmemHopper - kRawAt - kStagedBytes - kUnitKeysBytes) / 128 * 128)
                  : Staged<Mode>::kRawSlotBytes;
  static constexpr size_t kStagedAt = kRawAt + size_t(kRawSlots) * kRawSlotBytes;
  static constexpr size_t kUnitKeysAt = kStagedAt + kStagedBytes;
  static constexpr size_t kTotal = kUnitKeysAt + kUnitKeysBytes;
  static_assert(kRingAt % 8 == 0, "barriers stay aligned");
  static_assert(!kTileCopies || (Staged<Mode>::kRawSlots > 0 && kTotal <= kSmemHopper),
                "tile copies only beside modes with raw slots");
};

// ---- the kernel ---------------------------------------------------------------

// Channels-last 16-bit outputs (Problem::out_pixel_major) get kernels of their own
// (kPixelMajor): with both staged epilogues in one consumer loop, or both loops in
// one kernel, ptxas spilled the shared-memory base in the 16-bit kernels with two
// accumulator sets, and NCHW fp16 ran slower (perf-notes, "The measurements behind the
// code's choices"). float32 outputs branch at run time (store_tile): no spill there.
template <class Mode>
constexpr bool kPixelMajorKernels = Staged<Mode>::kHalfOutputs;

template <class Mode, DType T, Staging kStaging, int kUnits, bool kPixelMajor>
__global__ void __launch_bounds__(kTileThreads, 1)
    conv1_s2d_kernel(const __grid_constant__ Problem p, const __grid_constant__ Plan plan,
                     const __grid_constant__ WindowMap map) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma, TMA and setmaxnreg are sm_90a's; other targets compile no body
#else
  using Layout = SmemLayout<Mode, kStaging>;
  using Raw = typename Mode::Raw;
  using Split = RegisterSplit<Mode, kStaging, kUnits>;
  constexpr int kSlots = Staged<Mode>::kSlots;
  static_assert(std::is_same_v<Raw, typename Storage<T>::type>, "mode matches dtype");
  static_assert(!kPixelMajor || kPixelMajorKernels<Mode>, "float32 outputs branch at run time");
  static_assert(kOutChannels * kTapsPerChannel * sizeof(Raw) <= size_t(kSlots) * Staged<Mode>::kSlotBytes,
                "a channel's raw weights fit in the window slots");
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* b_all = reinterpret_cast<uint4*>(smem);
  uint8_t* k_taps = smem + Layout::kTapsAt;
  float* bias = reinterpret_cast<float*>(smem + Layout::kBiasAt);
  Ring<kSlots>& ring = *reinterpret_cast<Ring<kSlots>*>(smem + Layout::kRingAt);
  unsigned char* slots = smem + Layout::kSlotsAt;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // The raw slots, free until the first box lands, hold the weight scale's scratch; the
  // window slots, free until the producers start, a channel's raw weights.
  WeightScale weight_scale;
  const Round round = prepare<Mode, T, kSlots>(p, ring, k_taps, bias, b_all, reinterpret_cast<Raw*>(slots),
                                               reinterpret_cast<uint32_t*>(smem + Layout::kRawAt), weight_scale, tid);
  if (warp < kConsumerWarps) {
    const Consumer<Mode, T, kPixelMajor> consumer{
        p, plan, ring, smem_address(slots), smem_address(smem), bias,
        reinterpret_cast<uint16_t*>(smem + Layout::kStagedAt), weight_scale.inverse, warp, lane};
    if constexpr (Split::kOverlap) {
      setmaxnreg_inc<Split::kConsumer>();
      consume_overlapped(consumer);
    } else {
      consume(consumer);
    }
  } else {
    if constexpr (Split::kOverlap) setmaxnreg_dec<Split::kProducer>();
    if constexpr (kStaging != Staging::kLoads) {
      static_assert(Layout::kRawSlots > 0, "copies land in the raw slots");
      constexpr int kRawSlots = Layout::kRawSlots, kRawSlotBytes = Layout::kRawSlotBytes;
      uint32_t* unit_keys = reinterpret_cast<uint32_t*>(smem + Layout::kUnitKeysAt);
      if constexpr (kStaging == Staging::kTma) {
        const BoxCopies<Raw> boxes{&map, int(plan.box_cols * int64_t(sizeof(Raw)))};
        produce_copied<Mode, T, kUnits, kRawSlots, kRawSlotBytes>(
            p, plan, boxes, slots, smem + Layout::kRawAt, unit_keys, ring, warp - kConsumerWarps, lane);
      } else {
        const SpanCopies<Raw, kStaging == Staging::kPixelSpans> spans{int(p.in_stride[2] * int64_t(sizeof(Raw)))};
        produce_copied<Mode, T, kUnits, kRawSlots, kRawSlotBytes>(
            p, plan, spans, slots, smem + Layout::kRawAt, unit_keys, ring, warp - kConsumerWarps, lane);
      }
    } else {
      produce<Mode, T, kUnits>(p, plan, slots, ring, round, warp - kConsumerWarps, lane);
    }
  }
#endif
}

template <class Mode, DType T, Staging kStaging, int kUnits, bool kPixelMajor>
cudaError_t launch_layout(const LaunchPlan& plan, cudaStream_t stream) {
  constexpr auto kernel = conv1_s2d_kernel<Mode, T, kStaging, kUnits, kPixelMajor>;
  constexpr size_t kSmem = SmemLayout<Mode, kStaging>::kTotal;
  int64_t grid = 0;
  const cudaError_t err = persistent_grid<kernel>(kSmem, kTileThreads, plan.tiles, plan.sm_count, 1, grid);
  if (err != cudaSuccess) return err;
  kernel<<<unsigned(grid), kTileThreads, kSmem, stream>>>(plan.problem, plan.s2d, plan.map);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

template <class Mode, DType T, Staging kStaging, int kUnits>
cudaError_t launch_kernel(const LaunchPlan& plan, cudaStream_t stream) {
  if constexpr (kPixelMajorKernels<Mode>) {
    if (plan.pixel_major) return launch_layout<Mode, T, kStaging, kUnits, true>(plan, stream);
  }
  return launch_layout<Mode, T, kStaging, kUnits, false>(plan, stream);
}

// The kernel of the plan's staging (the stagings plan_in gives kUnits units per thread).
template <class Mode, DType T, int kUnits>
cudaError_t launch_staged(const LaunchPlan& plan, cudaStream_t stream) {
  if constexpr (Staged<Mode>::kRawSlots > 0) {
    if (plan.staging == Staging::kTma) return launch_kernel<Mode, T, Staging::kTma, kUnits>(plan, stream);
    if constexpr (kUnits == kFewestUnits) {
      if (plan.staging == Staging::kSpans) return launch_kernel<Mode, T, Staging::kSpans, kUnits>(plan, stream);
    }
    if constexpr (kUnits <= kFewestUnits + 1) {
      if (plan.staging == Staging::kPixelSpans) {
        return launch_layout<Mode, T, Staging::kPixelSpans, kUnits, kPixelMajorKernels<Mode>>(plan, stream);
      }
    }
  }
  if (plan.staging == Staging::kLoads) return launch_kernel<Mode, T, Staging::kLoads, kUnits>(plan, stream);
  return cudaErrorInvalidValue;  // not a staging plan_in gives
}

// A raw slot's bytes for this problem's dtype (modes with raw slots).
template <Staging kStaging>
int64_t raw_slot_bytes(const Problem& p) {
  return p.dtype == DType::kFloat32 ? SmemLayout<mma::Float32AsHalf, kStaging>::kRawSlotBytes
                                    : SmemLayout<mma::Half<false>, kStaging>::kRawSlotBytes;
}

// TMA staging for the modes with raw slots (16-bit inputs, float32 with allow_tf32):
// rows unit-stride and 16-byte aligned, and a box of every window (its rows x the
// virtual width's columns plus the alignment skew) that fits a raw slot. A box wider
// than TMA's 256 elements per dimension goes through the map of 16-byte units
// (encode_window_map_in_units), where rows are whole units.
struct Box {
  int64_t cols = 0, rows = 0;
  bool in_units = false;
};
// Whether TMA staging applies, and the box.
bool tma_box(const Problem& p, const Plan& plan, Box& box) {
  if (p.dtype == DType::kFloat32 && !p.allow_tf32) return false;  // bf16x3: no raw slots
  const int64_t elem = element_bytes(p.dtype);
  const int64_t per_unit = 16 / elem;  // elements per 16 bytes
  constexpr int64_t kMaxBoxDim = 256;
  // Even paddings only: a window starts `skew` elements into its box row, and the records are
  // read as aligned pairs (BoxCopies::record: float2, or 32-bit words of 16-bit pairs). An odd
  // padding gives an odd skew, a misaligned shared-memory load; those windows take row spans.
  const bool aligned = p.in_stride[3] == 1 && reinterpret_cast<uintptr_t>(p.input) % 16 == 0 &&
                       p.in_stride[2] % per_unit == 0 && p.in_stride[1] % per_unit == 0 &&
                       p.in_stride[0] % per_unit == 0 && p.pad % 2 == 0;
  // The skew (BoxCopies::skew) is below per_unit at any padding. (At padding 2 it is at most
  // per_unit - 2; the rounding up gives the same box either way, since kStride * wv is a
  // multiple of 4.)
  box.cols = (per_unit - 1 + kStride * plan.wv + per_unit - 1) / per_unit * per_unit;
  box.rows = window_rows(plan);
  box.in_units = box.cols > kMaxBoxDim;
  // float32 boxes in units measured slower than element loads (256, 512; perf-notes, "The
  // measurements behind the code's choices"): 16-byte units are twice as many per box as
  // for 16-bit elements.
  const bool units_ok = p.in_w % per_unit == 0 && box.cols / per_unit <= kMaxBoxDim && elem == 2;
  return aligned && (!box.in_units || units_ok) && box.rows <= kMaxBoxDim &&
         box.cols * box.rows * elem <= raw_slot_bytes<Staging::kTma>(p);
}

// Sets the plan's box and encodes `map` where TMA staging applies.
bool make_tma_plan(const Problem& p, Plan& plan, WindowMap& map) {
  Box box;
  if (!tma_box(p, plan, box)) return false;
  const bool encoded = box.in_units ? encode_window_map_in_units(p, box.cols, box.rows, map)
                                    : encode_window_map(p, box.cols, box.rows, map);
  if (!encoded) return false;
  plan.box_cols = box.cols;
  plan.box_rows = box.rows;
  plan.box_in_units = box.in_units;
  return true;
}

// Row-span staging (SpanCopies) where no box applies: unit-stride rows (kSpans) or
// channels_last pixels (kPixelSpans: column stride 3, channel stride 1), the input
// 16-byte aligned (a window's first byte aligned down stays in it), and the farthest
// byte a copy writes or a read reaches inside a raw slot (the landing offset is below
// 32, a 16-bit row read reaches 12 bytes past its first element).
template <Staging kStaging>
bool make_span_plan(const Problem& p, Plan& plan) {
  static_assert(kStaging == Staging::kSpans || kStaging == Staging::kPixelSpans, "row spans");
  if (p.dtype == DType::kFloat32 && !p.allow_tf32) return false;  // bf16x3: no raw slots
  const int64_t elem = element_bytes(p.dtype);
  const uintptr_t input = reinterpret_cast<uintptr_t>(p.input);
  const int64_t column_stride = kStaging == Staging::kPixelSpans ? kInChannels : 1;
  const bool layout = kStaging == Staging::kPixelSpans ? p.in_stride[3] == kInChannels && p.in_stride[1] == 1
                                                     : p.in_stride[3] == 1;
  if (!layout || input % 16 != 0 || p.in_stride[2] < 0 || p.in_stride[1] < 0 || p.in_stride[0] < 0) {
    return false;
  }
  const int64_t rows = window_rows(plan);
  const int64_t farthest =
      32 + elem * ((rows - 1) * p.in_stride[2] + column_stride * kStride * plan.wv) + 16;
  if (farthest > raw_slot_bytes<kStaging>(p)) return false;
  const int64_t last = (p.batch - 1) * p.in_stride[0] + (kInChannels - 1) * p.in_stride[1] +
                       (p.in_h - 1) * p.in_stride[2] + (p.in_w - 1) * p.in_stride[3];
  plan.box_rows = rows;
  plan.span_end = int64_t((input + uintptr_t(elem * (last + 1))) & ~uintptr_t(15));
  return true;
}


// Where a channels_last input takes one copy per tile (kPixelSpans), planning it: windows of up
// to 448 cells (224, 227, 256), outputs channels_last too where the mode has kernels of their
// own for those (16-bit), and the layout, alignment and slot make_span_plan asks.
template <class Mode>
bool pixel_spans_apply(const Problem& p, Plan& plan, const DeviceInfo& device) {
  return units_per_thread(plan) <= kFewestUnits + 1 && (!kPixelMajorKernels<Mode> || p.out_pixel_major) &&
         SmemLayout<Mode, Staging::kPixelSpans>::kTotal <= device.max_smem_per_block_optin &&
         make_span_plan<Staging::kPixelSpans>(p, plan);
}

// The space-to-depth plan in `Mode`: tiles, load units per thread, and the staging -- a TMA box
// per window where rows allow, else row spans (windows of up to 384 cells: 227 and narrower),
// else one copy per channels_last tile, else element loads (and always for bf16x3, which has
// no raw slots).
template <class Mode>
std::optional<LaunchPlan> plan_in(const Problem& p, const DeviceInfo& device, LaunchPlan plan) {
  if (SmemLayout<Mode, Staging::kLoads>::kTotal > device.max_smem_per_block_optin) return std::nullopt;
  plan.s2d = make_plan(p.batch, p.out_h, p.out_w, kPlaneRecords, /*from_tile=*/false, p.pad);
  if (plan.s2d.strips == 0) return std::nullopt;
  plan.tiles = plan.s2d.tiles;
  plan.units = units_per_thread(plan.s2d);
  plan.staging = Staging::kLoads;
  plan.pixel_major = kPixelMajorKernels<Mode> && p.out_pixel_major;
  if constexpr (Staged<Mode>::kRawSlots > 0) {
    if (make_tma_plan(p, plan.s2d, plan.map)) {
      plan.staging = Staging::kTma;
    } else if (plan.units == kFewestUnits && make_span_plan<Staging::kSpans>(p, plan.s2d)) {
      plan.staging = Staging::kSpans;  // one kernel per dtype rather than three
    } else if (pixel_spans_apply<Mode>(p, plan.s2d, device)) {
      plan.staging = Staging::kPixelSpans;
    }
  }
  plan.smem = SmemLayout<Mode, Staging::kLoads>::kTotal;
  if constexpr (Staged<Mode>::kRawSlots > 0) {
    if (plan.staging == Staging::kPixelSpans) plan.smem = SmemLayout<Mode, Staging::kPixelSpans>::kTotal;
  }
  return plan;
}

}  // namespace
}  // namespace s2d

std::optional<LaunchPlan> plan_s2d(const Problem& p, const DeviceInfo& device) {
  if (!wgmma_available(device)) return std::nullopt;
  const LaunchPlan plan =
      plan_of_kernel(Kernel::kS2d, p, device, operand_mode(p.dtype, p.allow_tf32, /*tf32_words=*/false));
  return visit_mode_without_tf32(plan.mode, std::optional<LaunchPlan>(), [&](auto mode) {
    return s2d::plan_in<typename decltype(mode)::Mode>(p, device, plan);
  });
}

cudaError_t launch_s2d(const LaunchPlan& plan, cudaStream_t stream) {
  if (plan.tiles == 0) return cudaSuccess;
  return visit_mode_without_tf32(plan.mode, cudaErrorInvalidValue, [&](auto mode) {
    using Mode = typename decltype(mode)::Mode;
    constexpr DType T = decltype(mode)::kDType;
    static_assert(s2d::kMaxUnitsPerThread == s2d::kFewestUnits + 2, "one launch per unit count");
    switch (plan.units) {
      case s2d::kFewestUnits: return s2d::launch_staged<Mode, T, s2d::kFewestUnits>(plan, stream);
      case s2d::kFewestUnits + 1: return s2d::launch_staged<Mode, T, s2d::kFewestUnits + 1>(plan, stream);
      default: return s2d::launch_staged<Mode, T, s2d::kMaxUnitsPerThread>(plan, stream);
    }
  });
}

}  // namespace cuda
}  // namespace alexconv
