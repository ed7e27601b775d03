// The tensor-core implicit GEMM: out[pixel][channel] = sum_k A[pixel][k] * B[k][channel],
// M = output pixels, N = 96, K = 3 x 121 (each channel padded to 128).
//
// A persistent grid of 512-thread CTAs walks the tiles of conv1_tiling.h. Per
// CTA, the packed weights of all three channels (B) stay in shared memory for the
// whole run; per tile, each input channel's window is staged once in one of two
// slots, the next channel's window travelling through registers while the
// current one is multiplied. Each warp owns 16 pixels x 96 channels; A fragments
// are gathered straight from the window (the im2col exists only in registers),
// and results leave as fp32 accumulators + bias, straight to global memory.
//
// Two engines run the MMAs: warp-level mma.sync (sm_80+, the portable path) and,
// on Hopper, warpgroup wgmma (sm_90a), which reads B from shared memory itself and
// runs asynchronously while the next step's A fragments are gathered.
#include "conv1_launch.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "../conv1_geometry.h"
#include "conv1_dtype.cuh"
#include "conv1_mma.cuh"
#include "conv1_tiling.h"
#include "conv1_window.cuh"

namespace alexconv {
namespace cuda {
namespace {

constexpr int kSteps = 8;                    // 128 padded taps per channel / 16
constexpr int kTapsPerChannel = kKernel * kKernel;
constexpr int kMTiles = 1;                   // m16 row tiles per warp (16 pixels)

template <class Mode>
struct SmemLayout {
  using Word = typename Mode::Word;
  // B in either engine's layout (the two happen to need the same bytes).
  static constexpr size_t kBMmaSync = size_t(kInChannels) * kSteps * Mode::kChunks * 32 * sizeof(uint4);
  static constexpr size_t kBWgmma =
      size_t(kInChannels) * kSteps * Mode::kWgBlocks * wgmma::kBlockBytes;
  static constexpr size_t kB = kBMmaSync > kBWgmma ? kBMmaSync : kBWgmma;
  static constexpr size_t kKoff = kSteps * 4 * sizeof(int4);
  static constexpr size_t kBias = kOutChannels * sizeof(float);
  static constexpr size_t kSlots = 2 * size_t(kSlotElems) * sizeof(Word);
  static constexpr size_t kTotal = kB + kKoff + kBias + kSlots;
  static_assert((kB + kKoff + kBias) % 16 == 0, "slots must stay 16-byte aligned");
};

// Per-thread view of the tile being multiplied: for its 2 m-tiles x 2 rows
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
      const int64_t q = tile.q_begin + local;
      r.window[mt][h] = 0;
      r.out[mt][h] = -1;
      if (local < plan.tile_pixels && q < tile.q_end) {
        const int64_t oy = q / tile.width, x = q % tile.width;
        r.window[mt][h] = int((oy - tile.oy0) * kStride * plan.pitch + skew + x * kStride);
        r.out[mt][h] = tile.n * p.out_stride[0] + oy * p.out_stride[2] +
                       (tile.x0 + x) * p.out_stride[3];
      }
    }
  }
  return r;
}

// Packs B (all channels, in the engine's layout) straight from the weight
// tensor (any strides; the 139 KB of weights come from L2 after the first CTA),
// then the tap-offset table and the bias. The window copies of the first stage
// are already in flight meanwhile. Returns how this launch splits its inputs
// (toward zero where some weight is infinite: see mma::Round).
template <class Mode, DType T, bool kWgmma>
__device__ mma::Round prepare_constants(const Problem& p, int pitch, uint4* b_frag, int4* koff,
                                        float* bias, int tid) {
  using Raw = typename Mode::Raw;
  const Raw* weight = static_cast<const Raw*>(p.weight);
  bool infinite_weight = false;
  for (int c = 0; c < kInChannels; ++c) {
    const Raw* wc = weight + c * p.weight_stride[1];
    const auto tap_value = [&](int n, int step, int col) {
      const int tap = step * 16 + col;
      const Raw v = tap < kTapsPerChannel
                        ? __ldg(wc + n * p.weight_stride[0] + (tap / kKernel) * p.weight_stride[2] +
                                (tap % kKernel) * p.weight_stride[3])
                        : Raw(0);
      if constexpr (std::is_same_v<Raw, float>) infinite_weight |= isinf(v);
      return v;
    };
    if constexpr (kWgmma) {
      // Word by word into 8x16-byte core matrices (see conv1_wgmma.cuh): a block
      // row is 32 bytes = 8 words per output channel.
      constexpr int kUnits = 8, kPerStep = kOutChannels * kUnits;
      // Fully unrolled (12 words per thread): every weight load in flight at once.
#pragma unroll
      for (int e = tid; e < kSteps * kPerStep; e += kTileThreads) {
        const int step = e / kPerStep, n = (e / kUnits) % kOutChannels, unit = e % kUnits;
        const auto w = [&](int n_, int col) { return tap_value(n_, step, col); };
        uint32_t words[Mode::kWgBlocks];
        Mode::wg_words(w, n, unit, words);
        unsigned char* step_blocks = reinterpret_cast<unsigned char*>(b_frag) +
                                     (c * kSteps + step) * Mode::kWgBlocks * wgmma::kBlockBytes +
                                     wgmma::block_offset(n, 4 * unit);
#pragma unroll
        for (int b = 0; b < Mode::kWgBlocks; ++b) {
          *reinterpret_cast<uint32_t*>(step_blocks + b * wgmma::kBlockBytes) = words[b];
        }
      }
    } else {
      constexpr int kPerStep = Mode::kChunks * 32;
#pragma unroll 4
      for (int e = tid; e < kSteps * kPerStep; e += kTileThreads) {
        const int step = e / kPerStep, chunk = (e / 32) % Mode::kChunks, lane = e % 32;
        const auto w = [&](int n, int col) { return tap_value(n, step, col); };
        b_frag[(c * kSteps + step) * kPerStep + chunk * 32 + lane] =
            Mode::pack_b(w, chunk, lane >> 2, lane & 3);
      }
    }
  }
  if (tid < kSteps * 4) {
    const int step = tid >> 2, t = tid & 3;
    int off[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int tap = step * 16 + Mode::col(t, j);
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
  if constexpr (kWgmma) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
  return __syncthreads_or(infinite_weight) ? mma::Round::kTowardZero : mma::Round::kNearest;
}

// The thread's A words of one step: pixel rows (g, g+8) of both m-tiles x 4 tap columns.
template <class Mode>
struct StepWords {
  typename Mode::Word x[kMTiles][2][4];
};

template <class Mode>
__device__ __forceinline__ void load_step(StepWords<Mode>& s, const typename Mode::Word* window,
                                          const PixelRows& rows, int4 k4) {
  const int ko[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 4; ++j) s.x[mt][h][j] = window[rows.window[mt][h] + ko[j]];
}

// The step's A fragments from its words. Taps 121..127 of the last step are
// padding: A is zeroed there (B is zero too, but an input of inf would give NaN).
template <class Mode>
__device__ __forceinline__ void make_step_a(typename Mode::A (&a)[kMTiles], StepWords<Mode>& s,
                                            int step, int t) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    if (step == kSteps - 1) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if ((kSteps - 1) * 16 + Mode::col(t, j) >= kTapsPerChannel) {
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
                                                 const PixelRows& rows, int lane) {
  const int t = lane & 3;
  StepWords<Mode> cur, nxt;
  load_step<Mode>(cur, window, rows, koff[t]);
  int4 k_next = koff[4 + t];
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    if (step + 1 < kSteps) {
      load_step<Mode>(nxt, window, rows, k_next);
      if (step + 2 < kSteps) k_next = koff[(step + 2) * 4 + t];
    }
    typename Mode::A a[kMTiles];
    make_step_a<Mode>(a, cur, step, t);
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
                                                       const PixelRows& rows, int lane) {
  const int t = lane & 3;
  StepWords<Mode> cur, nxt;
  load_step<Mode>(cur, window, rows, koff[t]);
  int4 k_next = koff[4 + t];
  typename Mode::A a[2][kMTiles];  // [step parity][m-tile]
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    if (step + 1 < kSteps) {
      load_step<Mode>(nxt, window, rows, k_next);
      if (step + 2 < kSteps) k_next = koff[(step + 2) * 4 + t];
    }
    make_step_a<Mode>(a[step & 1], cur, step, t);
    wgmma::fence();
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      Mode::wg_mma(acc[mt], a[step & 1][mt],
                   b_channel + step * Mode::kWgBlocks * wgmma::kBlockBytes);
    }
    wgmma::commit();
    wgmma::wait<1>();
    if (step + 1 < kSteps) cur = nxt;
  }
  wgmma::wait<0>();
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) wgmma::fence_accumulators(acc[mt]);
}

template <DType T>
__device__ void store_tile(float (&acc)[kMTiles][mma::kNTiles][4], const PixelRows& rows,
                           const float* bias, const Problem& p, int t) {
  using S = typename Storage<T>::type;
  S* out = static_cast<S*>(p.output);
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t base = rows.out[mt][h];
      if (base < 0) continue;
#pragma unroll
      for (int nt = 0; nt < mma::kNTiles; ++nt) {
        const int ch = nt * 8 + 2 * t;
        out[base + ch * p.out_stride[1]] = from_float<T>(acc[mt][nt][2 * h] + bias[ch]);
        out[base + (ch + 1) * p.out_stride[1]] =
            from_float<T>(acc[mt][nt][2 * h + 1] + bias[ch + 1]);
      }
    }
  }
}

template <class Mode, DType T, bool kWgmma, Staging kStaging>
__global__ void __launch_bounds__(kTileThreads, 1)
    conv1_igemm_kernel(const Problem p, const TilePlan plan) {
  using Word = typename Mode::Word;
  using Raw = typename Mode::Raw;
  constexpr bool kAsync = kStaging != Staging::kRegisters;
  constexpr int kUnitBytes = kStaging == Staging::kCopy16 ? 16 : 4;
  using Layout = SmemLayout<Mode>;
  static_assert(std::is_same_v<typename Mode::Raw, typename Storage<T>::type>, "mode matches dtype");
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* b_frag = reinterpret_cast<uint4*>(smem);
  int4* koff = reinterpret_cast<int4*>(smem + Layout::kB);
  float* bias = reinterpret_cast<float*>(smem + Layout::kB + Layout::kKoff);
  Word* slots = reinterpret_cast<Word*>(smem + Layout::kB + Layout::kKoff + Layout::kBias);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int pitch = int(plan.pitch);

  // Pipeline over stages (tile, channel): stage s is multiplied from slot s % 2
  // while stage s + 1 is staged into the other slot.
  int64_t tile_index = blockIdx.x;
  Tile tile = decode_tile(plan, tile_index);
  PixelRows rows = pixel_rows<kWgmma, sizeof(Raw)>(tile, plan, p, warp, lane >> 2);
  int channel = 0;

  // The stage after the one being multiplied ("next") is either landing through
  // cp.async or, for 16-bit inputs whose rows are not unit-stride 4-byte-aligned
  // runs, waiting in registers.
  static_assert(kAsync || sizeof(Raw) == 2, "float32 always takes cp.async");
  int64_t next_index = tile_index;
  Tile next = tile;
  int next_channel = 1;
  Raw regs[kAsync ? 1 : kLoadsPerThread];
  // The first window travels while B is packed.
  if constexpr (kAsync) {
    issue_window_async<Mode, kUnitBytes>(slots, p, tile, 0, pitch, warp, lane);
    copy_async_commit();
  } else {
    load_window<Mode>(regs, p, tile, 0, warp, lane);
  }
  const mma::Round input_round =
      prepare_constants<Mode, T, kWgmma>(p, pitch, b_frag, koff, bias, tid);
  if constexpr (kAsync) {
    issue_window_async<Mode, kUnitBytes>(slots + kSlotElems, p, next, next_channel, pitch, warp,
                                         lane);
    copy_async_commit();
    copy_async_wait<1>();  // the first window; the second may still be in flight
    convert_window<Mode, kUnitBytes>(slots, tile, pitch, warp, lane, input_round);
  } else {
    store_window<Mode>(slots, regs, tile, pitch, warp, lane, input_round);
    load_window<Mode>(regs, p, next, next_channel, warp, lane);
  }
  __syncthreads();

  float acc[kMTiles][mma::kNTiles][4] = {};
  for (int64_t stage = 0;; ++stage) {
    const Word* window = slots + (stage & 1) * kSlotElems;
    if constexpr (kWgmma) {
      multiply_channel_wgmma<Mode>(
          acc, window,
          static_cast<uint32_t>(__cvta_generic_to_shared(b_frag)) +
              channel * kSteps * Mode::kWgBlocks * wgmma::kBlockBytes,
          koff, rows, lane);
    } else {
      multiply_channel<Mode>(acc, window, b_frag + channel * kSteps * Mode::kChunks * 32, koff,
                             rows, lane);
    }
    if (channel == kInChannels - 1) {
      store_tile<T>(acc, rows, bias, p, lane & 3);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < mma::kNTiles; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;
    }
    const bool have_next = next_index < plan.tiles;
    Word* next_slot = slots + ((stage + 1) & 1) * kSlotElems;
    if (have_next) {
      if constexpr (kAsync) {
        copy_async_wait_all();
        convert_window<Mode, kUnitBytes>(next_slot, next, pitch, warp, lane, input_round);
      } else {
        store_window<Mode>(next_slot, regs, next, pitch, warp, lane, input_round);
      }
      if (++next_channel == kInChannels) {
        next_channel = 0;
        next_index += gridDim.x;
        if (next_index < plan.tiles) next = decode_tile(plan, next_index);
      }
      if constexpr (!kAsync) {
        if (next_index < plan.tiles) load_window<Mode>(regs, p, next, next_channel, warp, lane);
      }
    }
    __syncthreads();
    if (!have_next) break;
    if constexpr (kAsync) {
      // Everyone has finished multiplying from this stage's slot: refill it.
      if (next_index < plan.tiles) {
        issue_window_async<Mode, kUnitBytes>(slots + (stage & 1) * kSlotElems, p, next,
                                             next_channel, pitch, warp, lane);
        copy_async_commit();
      }
    }
    if (++channel == kInChannels) {
      channel = 0;
      tile_index += gridDim.x;
      tile = decode_tile(plan, tile_index);
      rows = pixel_rows<kWgmma, sizeof(Raw)>(tile, plan, p, warp, lane >> 2);
    }
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

template <class Mode, DType T, bool kWgmma, Staging kStaging>
cudaError_t launch_kernel(const Problem& p, const TilePlan& plan, const DeviceInfo& device,
                          cudaStream_t stream) {
  const auto kernel = conv1_igemm_kernel<Mode, T, kWgmma, kStaging>;
  const size_t smem = SmemLayout<Mode>::kTotal;
  // The shared-memory opt-in and the occupancy query cost microseconds of host time
  // per call, which small batches would pay on every launch: do them once per device.
  constexpr int kMaxDevices = 64;
  static std::atomic<int> blocks_per_sm[kMaxDevices];  // 0: not configured yet
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  int per_sm = dev < kMaxDevices ? blocks_per_sm[dev].load(std::memory_order_relaxed) : 0;
  if (per_sm == 0) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (err != cudaSuccess) return err;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kTileThreads, smem);
    if (err != cudaSuccess) return err;
    per_sm = std::max(per_sm, 1);
    // Threads racing here compute and store the same value.
    if (dev < kMaxDevices) blocks_per_sm[dev].store(per_sm, std::memory_order_relaxed);
  }
  const int64_t grid = std::min<int64_t>(plan.tiles, int64_t(per_sm) * device.sm_count);
  kernel<<<unsigned(grid), kTileThreads, smem, stream>>>(p, plan);
  return cudaSuccess;  // launch errors: C10_CUDA_KERNEL_LAUNCH_CHECK in the caller
}

template <class Mode, DType T, bool kWgmma>
cudaError_t launch_engine(const Problem& p, const TilePlan& plan, const DeviceInfo& device,
                          cudaStream_t stream) {
  switch (choose_staging<Mode>(p)) {
    case Staging::kCopy16:
      return launch_kernel<Mode, T, kWgmma, Staging::kCopy16>(p, plan, device, stream);
    case Staging::kCopy4:
      return launch_kernel<Mode, T, kWgmma, Staging::kCopy4>(p, plan, device, stream);
    case Staging::kRegisters:
      if constexpr (sizeof(typename Mode::Raw) == 2) {
        return launch_kernel<Mode, T, kWgmma, Staging::kRegisters>(p, plan, device, stream);
      }
      break;
  }
  return cudaErrorInvalidValue;
}

template <class Mode, DType T>
cudaError_t launch_typed(const Problem& p, const DeviceInfo& device, cudaStream_t stream) {
  const TilePlan plan = make_tile_plan(p.batch, p.out_h, p.out_w, device.sm_count);  // 1 CTA/SM
  if (plan.tiles == 0) return cudaSuccess;
  return device.allow_wgmma && wgmma_available(device)
             ? launch_engine<Mode, T, true>(p, plan, device, stream)
             : launch_engine<Mode, T, false>(p, plan, device, stream);
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

bool igemm_supported(const Problem& p, const DeviceInfo& device) {
  return device.major >= 8 && igemm_smem_bytes(p) <= device.max_smem_per_block_optin;
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
