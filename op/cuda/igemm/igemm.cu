// The tensor-core implicit GEMM: out[pixel][channel] = sum_k A[pixel][k] * B[k][channel],
// M = output pixels, N = 96, K = 3 x 121 (each channel padded to 128).
//
// A persistent grid of 512-thread CTAs walks the tiles of igemm/tile_plan.h. Per
// CTA, the packed weights of all three channels (B) stay in shared memory for the
// whole run. The warps then split into two roles that meet only at a ring of
// window slots (igemm/smem_layout.cuh): 4 producer warps stage each (tile, input
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
//
// The parts: tile_plan.h (tiles), smem_layout.cuh (K steps, shared memory, ring
// barriers), prologue.cuh (B, tap offsets, bias), window_staging.cuh and
// producers.cuh (the producer warps), pixel_map.cuh, a_fragments.cuh,
// mainloop_sm80.cuh / mainloop_sm90.cuh and consumers.cuh (the consumer warps). This
// file holds the kernel, the staging choice and the launch.
#include "../launch_plan.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "../../conv1_geometry.h"
#include "../common/channel_groups.cuh"
#include "../common/dtype.cuh"
#include "../common/occupancy.h"
#include "../common/tma_map.h"
#include "consumers.cuh"
#include "producers.cuh"
#include "prologue.cuh"
#include "smem_layout.cuh"
#include "tile_plan.h"

namespace alexconv {
namespace cuda {
namespace igemm {
namespace {

// The problem as the CTAs of channel group blockIdx.y see it (the whole problem for Whole
// kernels).
template <class F, int kElemBytes>
__device__ __forceinline__ Problem group_problem(const Problem& p) {
  if constexpr (F::kGroups == 1) {
    return p;
  } else {
    return cuda::group_problem<F::kChannels, kElemBytes>(p, int(blockIdx.y));
  }
}

template <class Mode, DType T, bool kWgmma, Staging kStaging, class F>
__global__ void __launch_bounds__(kTileThreads, 1)
    conv1_igemm_kernel(const Problem problem, const TilePlan plan,
                       const __grid_constant__ WindowMap window_map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // mma.sync, cp.async and mbarriers need sm_80; dispatch.cpp never launches it here
#else
  static_assert(!kWgmma || F::kGroups == 1, "wgmma kernels hold every channel");
  // mma::Float32AsHalf's weights pack only for mma.sync (it inherits Half's 16-bit wg_words).
  static_assert(!(kScalesWeights<Mode> && kWgmma), "float16 words of float32 only in mma.sync kernels");
  // Whole kernels read the parameter itself (a copy changes their code).
  Problem grouped;
  const Problem& p =
      F::kGroups == 1 ? problem : (grouped = group_problem<F, int(sizeof(typename Mode::Raw))>(problem));
  using Word = typename Mode::Word;
  constexpr bool kAsync = kStaging != Staging::kLoads && kStaging != Staging::kLoads16;
  constexpr int kStages = F::kStages, kRawSlots = F::kRawSlots;
  using Layout = SmemLayout<Mode, F>;
  static_assert(std::is_same_v<typename Mode::Raw, typename Storage<T>::type>, "mode matches dtype");
  static_assert(kAsync || sizeof(Word) == 2, "float32 words always take cp.async");
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* b_frag = reinterpret_cast<uint4*>(smem);
  int4* koff = reinterpret_cast<int4*>(smem + Layout::kKoffAt);
  float* bias = reinterpret_cast<float*>(smem + Layout::kBiasAt);
  uint8_t* k_taps = smem + Layout::kTapsAt;
  RingBarriers<kStages>& ring = *reinterpret_cast<RingBarriers<kStages>*>(smem + Layout::kRingAt);
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
  StageCursor<TilePlan> copy_at(plan);
  RingPos<kStages> copy_pos;
  const auto issue_first_stages = [&](int count) {
    if constexpr (kAsync) {
      for (int s = 0; s < count && producer; ++s) {
        issue_stage<Mode, kStaging, F>(p, &window_map, plan, slots, ring, copy_at, copy_pos, false,
                                    producer_warp, lane);
      }
    }
  };
  issue_first_stages(kStages - kRawSlots);
  // Ends in a CTA barrier.
  const Constants constants =
      prepare_constants<Mode, T, kWgmma, F>(p, int(plan.pitch), b_frag, koff, bias, k_taps,
                                         reinterpret_cast<typename Mode::Raw*>(
                                             slots + (kStages - kRawSlots) * kSlotElems),
                                         tid);
  issue_first_stages(kRawSlots - 1);
  if (!producer) {
    consume<Mode, T, kWgmma, F>(p, plan, slots, ring, b_frag, koff, bias,
                             reinterpret_cast<uint16_t*>(smem + Layout::kStagedAt), constants.unscale,
                             warp, lane);
  } else if constexpr (kAsync) {
    produce_async<Mode, kStaging, F>(p, &window_map, plan, slots, ring, copy_at, copy_pos,
                                  constants.round, producer_warp, lane);
  } else {
    produce_registers<Mode, T, kStaging, F>(p, plan, slots, ring, constants.round, producer_warp, lane);
  }
#endif
}

// ---- the plan --------------------------------------------------------------------

// Which copy staging the input's strides and alignment allow: 16-byte units, 4-byte units
// (any float32 element; 16-bit ones as aligned pairs), else element loads.
template <class Mode>
Staging copy_staging(const Problem& p) {
  const auto rows_aligned_to = [&](int64_t elems) {
    return p.in_stride[3] == 1 &&
           reinterpret_cast<uintptr_t>(p.input) % (elems * sizeof(typename Mode::Raw)) == 0 &&
           p.in_stride[0] % elems == 0 && p.in_stride[1] % elems == 0 &&
           p.in_stride[2] % elems == 0;
  };
  constexpr int64_t kPerCopy16 = kCopyBytes / sizeof(typename Mode::Raw);
  if (rows_aligned_to(kPerCopy16)) return Staging::kCopy16;
  if (sizeof(typename Mode::Raw) == 4 || rows_aligned_to(2)) return Staging::kCopy4;
  return Staging::kLoads;
}

// Turns `plan` into a TMA plan with `map` describing the input, every window
// copied as one window_box (igemm/tile_plan.h). Returns false where TMA cannot take
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

// The fits a mode has kernels for: 16-bit modes Whole and Halves (98,688 bytes, every sm_80+
// GPU; a quarter of the channels is no whole chunk); float32 accurate all three; TF32 words
// Whole and Quarters, and float32 as float16 words Halves alone (operand_mode: where TF32 words
// would need A100's 163 KB, float16 words take 99 KB).
template <class Mode, class F>
constexpr bool kHasFit =
    std::is_same_v<Mode, mma::Tf32> ? F::kGroups != 2
    : std::is_same_v<Mode, mma::Float32AsHalf> ? F::kGroups == 2
                                               : F::kNTiles % (mma::kNTiles / Mode::kChunks) == 0;

// The budgets the fits exist for (the compile check fails where one grows past them): every
// sm_80+ GPU's 99 KB per block for 16-bit Halves and float32 Quarters, A100's 163 KB for
// float32 Halves.
static_assert(SmemLayout<mma::Half<false>, Halves>::kTotal <= kSmem99KB &&
                  SmemLayout<mma::Half<true>, Halves>::kTotal <= kSmem99KB &&
                  SmemLayout<mma::Float32AsHalf, Halves>::kTotal <= kSmem99KB &&
                  SmemLayout<mma::Bf16x3, Quarters>::kTotal <= kSmem99KB &&
                  SmemLayout<mma::Tf32, Quarters>::kTotal <= kSmem99KB,
              "the portable fits take 99 KB");
static_assert(SmemLayout<mma::Bf16x3, Halves>::kTotal <= kSmemA100, "float32 Halves fits an A100");

// The fit's layout type (igemm/smem_layout.cuh) for the plan's fit, passed to `visit`.
template <class Visit>
auto visit_fit(cuda::Fit fit, Visit&& visit) {
  switch (fit) {
    case cuda::Fit::kHalves: return visit(Halves{});
    case cuda::Fit::kQuarters: return visit(Quarters{});
    case cuda::Fit::kWhole:
    case cuda::Fit::kThirds: break;
  }
  return visit(Whole{});
}

// The register gather's plan in `fit` on wgmma or mma.sync: its shared memory, tiles and staging.
template <class Mode, class F>
std::optional<LaunchPlan> plan_in(const Problem& p, const DeviceInfo& device, bool wgmma, LaunchPlan plan) {
  if constexpr (!kHasFit<Mode, F>) {
    return std::nullopt;
  } else {
    plan.smem = SmemLayout<Mode, F>::kTotal;
    if (plan.smem > device.max_smem_per_block_optin) return std::nullopt;
    // Tile sizes balance the CTAs one group has (one CTA per SM).
    plan.igemm = make_tile_plan(p.batch, p.out_h, p.out_w, std::max(device.sm_count / F::kGroups, 1), p.pad);
    if (plan.igemm.strips == 0) return std::nullopt;
    plan.tiles = plan.igemm.tiles;
    const Staging copies = copy_staging<Mode>(p);
    if constexpr (std::is_same_v<Mode, mma::Float32AsHalf>) {
      // Float32 as 16-bit words: through registers, 16 bytes a load where rows allow and the
      // width is whole units (load_window_units reads no partial one).
      plan.staging = copies == Staging::kCopy16 && p.in_w % 4 == 0 ? Staging::kLoads16 : Staging::kLoads;
    } else {
      plan.staging = copies;
      // TMA and wgmma arrive together, with Hopper.
      if (wgmma && copies == Staging::kCopy16 && make_tma_plan<Mode>(p, plan.igemm, plan.map)) {
        plan.staging = Staging::kTma;
      }
    }
    return plan;
  }
}

// ---- the launch ------------------------------------------------------------------

template <class Mode, DType T, bool kWgmma, Staging kStaging, class F>
cudaError_t launch_kernel(const LaunchPlan& plan, cudaStream_t stream) {
  constexpr auto kernel = conv1_igemm_kernel<Mode, T, kWgmma, kStaging, F>;
  // A persistent grid: every CTA resident at once, the groups of a tile side by side. Groups
  // wholly past the weight's channels (Problem::out_channels) are not launched.
  const Problem& p = plan.problem;
  const int groups = launched_groups(p.out_channels, F::kChannels);
  int64_t grid = 0;
  const cudaError_t err = persistent_grid<kernel>(plan.smem, kTileThreads, plan.tiles, plan.sm_count, groups, grid);
  if (err != cudaSuccess) return err;
  TilePlan ordered = plan.igemm;
  if (ordered.strips > 1 && ordered.tiles >= kMinTurnsForRuns * grid) {
    ordered.order = contiguous_runs(ordered.tiles, grid);
  }
  kernel<<<dim3(unsigned(grid), unsigned(groups)), kTileThreads, plan.smem, stream>>>(p, ordered, plan.map);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

// The kernel of the plan's staging (the stagings each mode and engine has: plan_in).
template <class Mode, DType T, bool kWgmma, class F>
cudaError_t launch_staged(const LaunchPlan& plan, cudaStream_t stream) {
  if constexpr (std::is_same_v<Mode, mma::Float32AsHalf>) {
    if (plan.staging == Staging::kLoads16) return launch_kernel<Mode, T, kWgmma, Staging::kLoads16, F>(plan, stream);
    if (plan.staging == Staging::kLoads) return launch_kernel<Mode, T, kWgmma, Staging::kLoads, F>(plan, stream);
  } else {
    if constexpr (kWgmma) {
      if (plan.staging == Staging::kTma) return launch_kernel<Mode, T, kWgmma, Staging::kTma, F>(plan, stream);
    }
    if (plan.staging == Staging::kCopy16) return launch_kernel<Mode, T, kWgmma, Staging::kCopy16, F>(plan, stream);
    if (plan.staging == Staging::kCopy4) return launch_kernel<Mode, T, kWgmma, Staging::kCopy4, F>(plan, stream);
    if constexpr (sizeof(typename Mode::Raw) == 2) {
      if (plan.staging == Staging::kLoads) return launch_kernel<Mode, T, kWgmma, Staging::kLoads, F>(plan, stream);
    }
  }
  return cudaErrorInvalidValue;  // not a staging plan_in gives this mode
}

}  // namespace
}  // namespace igemm

// wgmma code exists only where CMake built the kernels for sm_90a.
bool wgmma_available(const DeviceInfo& device) {
#if defined(ALEXCONV_BUILT_FOR_SM90A)
  return device.major == 9 && device.minor == 0;
#else
  (void)device;
  return false;
#endif
}

std::optional<LaunchPlan> plan_igemm(const Problem& p, const DeviceInfo& device, Fit fit, bool wgmma) {
  // Odd paddings start windows at odd columns, which the paired K order cannot read.
  if (device.major < 8 || fit == Fit::kThirds || p.pad % 2 != 0) return std::nullopt;
  if (wgmma && (fit != Fit::kWhole || !wgmma_available(device))) return std::nullopt;
  const Kernel kernel = wgmma                  ? Kernel::kWgmma
                        : fit == Fit::kHalves   ? Kernel::kMmaSyncN48
                        : fit == Fit::kQuarters ? Kernel::kMmaSyncN24
                                                : Kernel::kMmaSync;
  // TF32 words where the fit's layout has room for them (not in Halves).
  LaunchPlan plan =
      plan_of_kernel(kernel, p, device, operand_mode(p.dtype, p.allow_tf32, /*tf32_words=*/fit != Fit::kHalves));
  plan.fit = fit;
  return visit_mode(plan.mode, [&](auto mode) {
    return igemm::visit_fit(fit, [&](auto shape) {
      return igemm::plan_in<typename decltype(mode)::Mode, decltype(shape)>(p, device, wgmma, plan);
    });
  });
}

cudaError_t launch_igemm(const LaunchPlan& plan, cudaStream_t stream) {
  if (plan.tiles == 0) return cudaSuccess;
  return visit_mode(plan.mode, [&](auto mode) {
    using Mode = typename decltype(mode)::Mode;
    constexpr DType T = decltype(mode)::kDType;
    return igemm::visit_fit(plan.fit, [&](auto shape) -> cudaError_t {
      using F = decltype(shape);
      if constexpr (!igemm::kHasFit<Mode, F>) {
        return cudaErrorInvalidValue;  // plan_igemm gives no such plan
      } else if constexpr (F::kGroups == 1) {
        if (plan.kernel == Kernel::kWgmma) return igemm::launch_staged<Mode, T, true, F>(plan, stream);
        return igemm::launch_staged<Mode, T, false, F>(plan, stream);
      } else {
        return igemm::launch_staged<Mode, T, false, F>(plan, stream);
      }
    });
  });
}

}  // namespace cuda
}  // namespace alexconv
