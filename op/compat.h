// The one place that knows which torch C++ API this build compiles against (issue 45:
// torch 1.13 is the oldest supported). Each shim takes today's API wherever the torch at
// hand has it, so a torch 2.x build compiles exactly the calls it made before; the older
// branch is what torch 1.13.1 offers (built and run by scripts/legacy/check_legacy.sh). The
// version each API appeared in is torch's; only 1.13.1 and 2.13 are built here.
//
// Optional arguments are c10::optional everywhere in op/: torch 1.13's dispatcher only
// takes its own c10::optional, which is an alias of std::optional from torch 2.4 on.
#pragma once

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

#include <cstdlib>
#include <string>

#define ALEXCONV_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||           \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if ALEXCONV_TORCH_AT_LEAST(2, 1)
#include <ATen/Version.h>
#endif
#if ALEXCONV_TORCH_AT_LEAST(2, 0)
#include <c10/core/SymBool.h>
#endif

namespace alexconv {
namespace compat {

// Evaluates a condition on (possibly symbolic) sizes. torch 2.0+ compares SymInts into a
// SymBool, which guards on the result under torch.compile; torch 1.13 gives a plain bool.
#if ALEXCONV_TORCH_AT_LEAST(2, 0)
inline bool guard(const c10::SymBool& condition, const char* file, int64_t line) {
  return condition.guard_bool(file, line);
}
#else
inline bool guard(bool condition, const char* /*file*/, int64_t /*line*/) { return condition; }
#endif

// Typed data pointers: const_data_ptr/mutable_data_ptr (torch 2.1+) say which accesses
// write, for copy-on-write tensors; before them, data_ptr was both.
template <typename T>
const T* const_data_ptr(const at::Tensor& t) {
#if ALEXCONV_TORCH_AT_LEAST(2, 1)
  return t.const_data_ptr<T>();
#else
  return t.data_ptr<T>();
#endif
}
template <typename T>
T* mutable_data_ptr(const at::Tensor& t) {
#if ALEXCONV_TORCH_AT_LEAST(2, 1)
  return t.mutable_data_ptr<T>();
#else
  return t.data_ptr<T>();
#endif
}
// Untyped, for the CUDA kernels' argument block.
inline const void* const_data_ptr(const at::Tensor& t) {
#if ALEXCONV_TORCH_AT_LEAST(2, 1)
  return t.const_data_ptr();
#else
  return t.data_ptr();
#endif
}
inline void* mutable_data_ptr(const at::Tensor& t) {
#if ALEXCONV_TORCH_AT_LEAST(2, 1)
  return t.mutable_data_ptr();
#else
  return t.data_ptr();
#endif
}

// Python's name of a dtype (float32, not Float), as users write it in error messages.
// torch 1.13 keeps its table (torch::utils::getDtypeNames) in the Python bindings, which a
// C++ program does not load: the same names here for the dtypes a user can pass.
inline std::string dtype_name(at::ScalarType t) {
#if ALEXCONV_TORCH_AT_LEAST(2, 4)
  // A copy: torch 2.11 returns the names as std::string by value, so a view would dangle.
  return std::string(c10::getDtypeNames(t).first);
#else
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kByte: return "uint8";
    case at::kChar: return "int8";
    case at::kShort: return "int16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kBool: return "bool";
    case at::kComplexHalf: return "complex32";
    case at::kComplexFloat: return "complex64";
    case at::kComplexDouble: return "complex128";
    case at::kQInt8: return "qint8";
    case at::kQUInt8: return "quint8";
    case at::kQInt32: return "qint32";
    case at::kQUInt4x2: return "quint4x2";
    case at::kQUInt2x4: return "quint2x4";
    default: return c10::toString(t);
  }
#endif
}

// ATen's CPU capability ("DEFAULT", "AVX2", "AVX512"; ATEN_CPU_CAPABILITY overrides it).
// torch 1.13 does not export its own (at::native::get_cpu_capability): the same override
// rule here, and otherwise the highest level, "AVX512", which 1.13 picks where the CPU has
// AVX-512 F/BW/DQ/VL (the caller checks what this CPU supports, and steps down to AVX2).
inline std::string cpu_capability() {
#if ALEXCONV_TORCH_AT_LEAST(2, 1)
  return at::get_cpu_capability();
#else
  const char* env = std::getenv("ATEN_CPU_CAPABILITY");
  const std::string forced = env ? env : "";
  if (forced == "default") return "DEFAULT";
  if (forced == "avx2") return "AVX2";
  return "AVX512";
#endif
}

// The dtype torch.autocast casts to on `device` (torch 2.4 made it one call).
inline at::ScalarType autocast_dtype(c10::DeviceType device) {
#if ALEXCONV_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                        : at::autocast::get_autocast_gpu_dtype();
#endif
}

}  // namespace compat
}  // namespace alexconv
