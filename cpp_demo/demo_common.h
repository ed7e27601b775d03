// What the demos (alexconv_demo, alexconv_aoti_demo) share: the command line (a bad argument
// prints the error and the program's usage line to stderr and exits with status 2), the
// numerical contract they check, and how they time.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace alexconv_demo {

struct Cli {
  const char* usage_text;

  [[noreturn]] void usage(const std::string& error) const {
    std::cerr << "error: " << error << "\n" << usage_text;
    std::exit(2);
  }

  int64_t parse_int(const std::string& flag, const std::string& text, int64_t min) const {
    try {
      size_t used = 0;
      const long long v = std::stoll(text, &used);
      if (used == text.size() && v >= min) return v;
    } catch (const std::exception&) {
    }
    usage(flag + " needs an integer >= " + std::to_string(min) + ", got '" + text + "'");
  }

  double parse_double(const std::string& flag, const std::string& text) const {
    try {
      size_t used = 0;
      const double v = std::stod(text, &used);
      if (used == text.size() && v >= 0) return v;
    } catch (const std::exception&) {
    }
    usage(flag + " needs a number >= 0, got '" + text + "'");
  }
};

// The numerical contract: float32-accurate by default; TF32 and half types are checked at
// their own precision.
inline double default_tolerance(at::ScalarType dtype, bool allow_tf32) {
  if (dtype == at::kHalf) return 1e-2;
  if (dtype == at::kBFloat16) return 5e-2;
  return allow_tf32 ? 5e-3 : 1e-4;
}

// Median wall time of fn over `iters` runs after one warm-up (first-call allocations, kernel
// attribute setup), each run synchronised on CUDA.
template <class F>
double median_ms(const F& fn, int64_t iters, bool cuda) {
  fn();
  std::vector<double> ms;
  for (int64_t i = 0; i < iters; ++i) {
    if (cuda) torch::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    if (cuda) torch::cuda::synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

}  // namespace alexconv_demo
