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
#include "../catalog.h"
#include "../kernel_api.h"

#include <algorithm>
#include <cstdint>
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

// The problem as the CTAs of channel group blockIdx.y see it (the whole problem for Resident
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
  // mma::Tf32AsHalf's weights pack only for mma.sync (it inherits Half's 16-bit wg_words).
  static_assert(!(kScalesWeights<Mode> && kWgmma), "float16 words of float32 only in mma.sync kernels");
  // Resident kernels read the parameter itself (a copy changes their code).
  Problem grouped;
  const Problem& p =
      F::kGroups == 1 ? problem : (grouped = group_problem<F, int(sizeof(typename Mode::Raw))>(problem));
  using Word = typename Mode::Word;
  constexpr bool kAsync = kStaging != Staging::kRegisters && kStaging != Staging::kRegisters16;
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

// Which staging the input's strides and alignment allow (see Staging). Float32 staged as
// 16-bit words (mma::Tf32AsHalf) goes through registers (launch_engine): kRegisters16 where this says kCopy16.
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

template <class Mode, DType T, bool kWgmma, Staging kStaging, class F>
cudaError_t launch_kernel(const Problem& p, const TilePlan& plan, const WindowMap& window_map,
                          const DeviceInfo& device, cudaStream_t stream) {
  constexpr auto kernel = conv1_igemm_kernel<Mode, T, kWgmma, kStaging, F>;
  const size_t smem = SmemLayout<Mode, F>::kTotal;
  int per_sm = 0;
  const cudaError_t err = resident_ctas_per_sm<kernel>(smem, kTileThreads, per_sm);
  if (err != cudaSuccess) return err;
  // A persistent grid: every CTA resident at once, the groups of a tile side by side. Groups
  // wholly past the weight's channels (Problem::out_channels) are not launched.
  const int groups = launched_groups(p.out_channels, F::kChannels);
  const int64_t grid = std::min<int64_t>(plan.tiles, std::max<int64_t>(int64_t(per_sm) * device.sm_count / groups, 1));
  TilePlan ordered = plan;
  if (plan.strips > 1 && plan.tiles >= kMinTurnsForRuns * grid) {
    ordered.order = contiguous_runs(plan.tiles, grid);
  }
  kernel<<<dim3(unsigned(grid), unsigned(groups)), kTileThreads, smem, stream>>>(p, ordered, window_map);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

template <class Mode, DType T, bool kWgmma, class F>
cudaError_t launch_engine(const Problem& p, const TilePlan& plan, const DeviceInfo& device,
                          cudaStream_t stream) {
  WindowMap map{};  // read by TMA kernels only
  if constexpr (sizeof(typename Mode::Word) < sizeof(typename Mode::Raw)) {
    // Float32 as 16-bit words: through registers, 16 bytes a load where rows allow and the
    // width is whole units (load_window_units reads no partial one).
    if (choose_staging<Mode>(p) == Staging::kCopy16 && p.in_w % 4 == 0) {
      return launch_kernel<Mode, T, kWgmma, Staging::kRegisters16, F>(p, plan, map, device, stream);
    }
    return launch_kernel<Mode, T, kWgmma, Staging::kRegisters, F>(p, plan, map, device, stream);
  } else {
    const Staging staging = choose_staging<Mode>(p);
    if constexpr (kWgmma) {  // TMA and wgmma arrive together, with Hopper
      TilePlan tma_plan = plan;
      if (staging == Staging::kCopy16 && make_tma_plan<Mode>(p, tma_plan, map)) {
        return launch_kernel<Mode, T, kWgmma, Staging::kTma, F>(p, tma_plan, map, device, stream);
      }
    }
    switch (staging) {
      case Staging::kCopy16:
        return launch_kernel<Mode, T, kWgmma, Staging::kCopy16, F>(p, plan, map, device, stream);
      case Staging::kCopy4:
        return launch_kernel<Mode, T, kWgmma, Staging::kCopy4, F>(p, plan, map, device, stream);
      case Staging::kRegisters:
        if constexpr (sizeof(typename Mode::Raw) == 2) {
          return launch_kernel<Mode, T, kWgmma, Staging::kRegisters, F>(p, plan, map, device, stream);
        }
        break;
      case Staging::kTma:
      case Staging::kRegisters16: break;  // chosen above, never by choose_staging
    }
    return cudaErrorInvalidValue;
  }
}

// The budgets the fits exist for (the compile check fails where one grows past them): every
// sm_80+ GPU's 99 KB per block for 16-bit HalfN and float32 QuarterN, A100's 163 KB for
// float32 HalfN.
static_assert(SmemLayout<mma::Half<false>, HalfN>::kTotal <= kSmem99KB &&
                  SmemLayout<mma::Half<true>, HalfN>::kTotal <= kSmem99KB &&
                  SmemLayout<mma::Tf32AsHalf, HalfN>::kTotal <= kSmem99KB &&
                  SmemLayout<mma::Bf16x3, QuarterN>::kTotal <= kSmem99KB &&
                  SmemLayout<mma::Tf32, QuarterN>::kTotal <= kSmem99KB,
              "the portable fits take 99 KB");
static_assert(SmemLayout<mma::Bf16x3, HalfN>::kTotal <= kSmemA100 && SmemLayout<mma::Tf32, HalfN>::kTotal <= kSmemA100,
              "float32 HalfN fits an A100");

// The fits a mode has kernels for: float32 modes all three, 16-bit ones Resident and HalfN
// (whose 98,688 bytes fit every sm_80+ GPU; a quarter of the channels is no whole chunk).
template <class Mode, class F>
constexpr bool kHasFit = F::kNTiles % (mma::kNTiles / Mode::kChunks) == 0;

// The plan of a fit: its tile sizes balance the CTAs one group has (one CTA per SM).
template <class F>
TilePlan plan_for(const Problem& p, const DeviceInfo& device) {
  return make_tile_plan(p.batch, p.out_h, p.out_w, std::max(device.sm_count / F::kGroups, 1));
}

template <class Mode, DType T, class F>
cudaError_t launch_fit(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  if constexpr (!kHasFit<Mode, F>) {
    return cudaErrorInvalidValue;  // igemm_fit never picks it
  } else {
    const TilePlan plan = plan_for<F>(p, device);
    if (plan.strips == 0) return cudaErrorInvalidValue;  // callers ask igemm_fit first
    if (plan.tiles == 0) return cudaSuccess;
    if constexpr (F::kGroups == 1) {
      if (device.allow_wgmma && wgmma_available(device)) {
        return launch_engine<Mode, T, true, F>(p, plan, device, stream);
      }
    }
    return launch_engine<Mode, T, false, F>(p, plan, device, stream);
  }
}

template <class Mode, DType T>
cudaError_t launch_typed(const Problem& p, const DeviceInfo& device, IgemmFit fit, cudaStream_t stream) {
  switch (fit) {
    case IgemmFit::kResident: return launch_fit<Mode, T, Resident>(p, device, stream);
    case IgemmFit::kHalfN: return launch_fit<Mode, T, HalfN>(p, device, stream);
    case IgemmFit::kQuarterN: return launch_fit<Mode, T, QuarterN>(p, device, stream);
    case IgemmFit::kNone: break;
  }
  return cudaErrorInvalidValue;
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

template <class Mode>
size_t smem_bytes(IgemmFit fit) {
  switch (fit) {
    case IgemmFit::kResident: return SmemLayout<Mode, Resident>::kTotal;
    case IgemmFit::kHalfN: return kHasFit<Mode, HalfN> ? SmemLayout<Mode, HalfN>::kTotal : ~size_t(0);
    case IgemmFit::kQuarterN: return kHasFit<Mode, QuarterN> ? SmemLayout<Mode, QuarterN>::kTotal : ~size_t(0);
    case IgemmFit::kNone: break;
  }
  return ~size_t(0);
}

size_t igemm_smem_bytes(const Problem& p, IgemmFit fit) {
  switch (p.dtype) {
    case DType::kFloat32:
      if (!p.allow_tf32) return smem_bytes<mma::Bf16x3>(fit);
      return fit == IgemmFit::kHalfN ? smem_bytes<mma::Tf32AsHalf>(fit) : smem_bytes<mma::Tf32>(fit);
    case DType::kFloat16: return smem_bytes<mma::Half<false>>(fit);
    case DType::kBFloat16: return smem_bytes<mma::Half<true>>(fit);
  }
  return ~size_t(0);
}

int groups_of(IgemmFit fit) {
  return fit == IgemmFit::kHalfN ? HalfN::kGroups : fit == IgemmFit::kQuarterN ? QuarterN::kGroups : 1;
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

WindowStaging igemm_window_staging(const Problem& p, const DeviceInfo& device) {
  switch (p.dtype) {
    case DType::kFloat32: return igemm::window_staging<mma::Bf16x3>(p, device);
    case DType::kFloat16: return igemm::window_staging<mma::Half<false>>(p, device);
    case DType::kBFloat16: return igemm::window_staging<mma::Half<true>>(p, device);
  }
  return WindowStaging::kCopy16;
}

bool igemm_fit_supported(const Problem& p, const DeviceInfo& device, IgemmFit fit) {
  if (device.major < 8 || fit == IgemmFit::kNone) return false;
  if (igemm::igemm_smem_bytes(p, fit) > device.max_smem_per_block_optin) return false;
  const int groups = igemm::groups_of(fit);
  return igemm::make_tile_plan(p.batch, p.out_h, p.out_w, std::max(device.sm_count / groups, 1)).strips > 0;
}

IgemmFit igemm_fit(const Problem& p, const DeviceInfo& device) {
  for (IgemmFit fit : {IgemmFit::kResident, IgemmFit::kHalfN, IgemmFit::kQuarterN}) {
    if (igemm_fit_supported(p, device, fit)) return fit;
  }
  return IgemmFit::kNone;
}

cudaError_t launch_conv1_igemm(const Problem& p, const DeviceInfo& device, IgemmFit fit, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::kFloat32:
      if (!p.allow_tf32) return igemm::launch_typed<mma::Bf16x3, DType::kFloat32>(p, device, fit, stream);
      // allow_tf32 in the HalfN fit multiplies float16 words (mma::Tf32AsHalf): 99 KB, where
      // TF32 words need A100's 163 KB; the other fits keep TF32 words.
      if (fit == IgemmFit::kHalfN) {
        return igemm::launch_fit<mma::Tf32AsHalf, DType::kFloat32, igemm::HalfN>(p, device, stream);
      }
      return igemm::launch_typed<mma::Tf32, DType::kFloat32>(p, device, fit, stream);
    case DType::kFloat16: return igemm::launch_typed<mma::Half<false>, DType::kFloat16>(p, device, fit, stream);
    case DType::kBFloat16: return igemm::launch_typed<mma::Half<true>, DType::kBFloat16>(p, device, fit, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace alexconv

