// alexconv_aoti_demo: runs an AOTInductor package of ModelNew (alexconv-export MODEL.pt2)
// from C++ with torch::inductor::AOTIModelPackageLoader and checks it against
// at::conv2d in float64: with the package's own weights (where the runner has
// extract_constants_map: torch >= 2.8), then with fresh ones loaded through load_constants
// (torch >= 2.6); reports latency.
//
//   alexconv_aoti_demo MODEL.pt2 [--device cpu|cuda] [--batch N] [--size HW] [--iters K]
//                      [--atol A] [--rtol R] [--seed S]
//
// The package runs alexconv::conv1 through its proxy executor, which looks the op up in
// the dispatcher by name: the executable links libalexconv (--no-as-needed, CMakeLists.txt)
// so that its registrations run before the package loads. The device is the package's own
// (alexconv-export --device); --device, as alexconv_demo takes it, checks that the package was
// compiled for that device. A CUDA package needs a CUDA libtorch and a GPU.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/cuda.h>
#include <torch/utils.h>  // torch::manual_seed (CPU and CUDA generators); not torch/torch.h: half the compile time

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "demo_common.h"

namespace {

using alexconv_demo::default_tolerance;
using alexconv_demo::median_ms;

struct Options {
  std::string package;
  std::optional<std::string> device;  // checked against the package's own
  // The package's dynamic dimensions start at batch 1 and 11x11 (python/alexconv/export.py).
  int64_t batch = 8, size = 224, iters = 10;
  std::optional<double> atol, rtol;  // default: by dtype and the package's allow_tf32
  std::optional<int64_t> seed;        // of the input; default: a fresh one, printed
};

constexpr const char* kUsage =
    "usage: alexconv_aoti_demo MODEL.pt2 [--device cpu|cuda] [--batch N] [--size HW] [--iters K] "
    "[--atol A] [--rtol R] [--seed S]\n"
    "  --device: the device the package was exported for (alexconv-export --device); a package\n"
    "            runs on that device only, so another one is an error\n";

const alexconv_demo::Cli cli{kUsage};

Options parse(int argc, char** argv) {
  Options o;
  const std::vector<std::string> args(argv + 1, argv + argc);
  static const char* const kOptions[] = {"--device", "--batch", "--size", "--iters", "--atol", "--rtol",
                                         "--seed"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (a.size() < 2 || a[0] != '-') {  // a path that starts with '-' can be given as ./-name
      if (!o.package.empty()) cli.usage("more than one package given: '" + o.package + "' and '" + a + "'");
      o.package = a;
      continue;
    }
    if (std::find(std::begin(kOptions), std::end(kOptions), a) == std::end(kOptions))
      cli.usage("unknown option " + a);
    if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0) cli.usage(a + " needs a value");
    const std::string& v = args[++i];
    if (a == "--device") {
      if (v != "cpu" && v != "cuda") cli.usage("--device must be cpu or cuda, got " + v);
      o.device = v;
    } else if (a == "--batch") o.batch = cli.parse_int(a, v, 1);
    else if (a == "--size") o.size = cli.parse_int(a, v, 11);
    else if (a == "--iters") o.iters = cli.parse_int(a, v, 1);
    else if (a == "--seed") o.seed = cli.parse_int(a, v, 0);
    else if (a == "--atol") o.atol = cli.parse_double(a, v);
    else o.rtol = cli.parse_double(a, v);  // --rtol
  }
  if (o.package.empty()) cli.usage("no package given");
  return o;
}

std::string metadata_value(const std::unordered_map<std::string, std::string>& metadata,
                           const std::string& key, const std::string& path) {
  const auto it = metadata.find(key);
  if (it == metadata.end())
    throw std::runtime_error(path + " has no metadata '" + key +
                             "': not a package written by alexconv-export");
  return it->second;
}

at::ScalarType dtype_named(const std::string& name, const std::string& path) {
  if (name == "float32") return at::kFloat;
  if (name == "float16") return at::kHalf;
  if (name == "bfloat16") return at::kBFloat16;
  throw std::runtime_error(path + ": unknown alexconv.dtype '" + name + "'");
}

#ifdef ALEXCONV_AOTI_EXTRACT_CONSTANTS
at::Tensor constant(const std::unordered_map<std::string, at::Tensor>& constants,
                    const std::string& name, const std::string& path) {
  const auto it = constants.find(name);
  if (it == constants.end()) throw std::runtime_error(path + " has no constant '" + name + "'");
  return it->second;
}
#endif

struct Result {
  std::vector<int64_t> shape;
  double max_abs = 0, rel_norm = 0;
  bool ok = false;
};

// Runs the package on `input` and compares it with at::conv2d in float64 (far more accurate
// than the path under test) with the weights the package is expected to hold.
Result check(torch::inductor::AOTIModelPackageLoader& loader, std::vector<at::Tensor>& inputs,
             const at::Tensor& weight, const at::Tensor& bias, double atol, double rtol) {
  const std::vector<at::Tensor> outs = loader.run(inputs);
  if (outs.size() != 1) throw std::runtime_error("expected 1 output, got " + std::to_string(outs.size()));
  const at::Tensor& out = outs[0];
  const at::Tensor ref = at::conv2d(inputs[0].to(at::kDouble), weight.to(at::kDouble),
                                    bias.to(at::kDouble), {4, 4}, {2, 2});
  Result r;
  r.shape = out.sizes().vec();
  if (out.sizes() != ref.sizes() || out.scalar_type() != inputs[0].scalar_type()) return r;
  const at::Tensor diff = out.to(at::kDouble) - ref;
  r.max_abs = out.numel() ? diff.abs().max().item<double>() : 0.0;
  r.rel_norm = diff.norm().item<double>() / std::max(ref.norm().item<double>(), 1e-300);
  r.ok = at::allclose(out.to(at::kDouble), ref, rtol, atol, /*equal_nan=*/false);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);

  std::optional<torch::inductor::AOTIModelPackageLoader> loader;
  std::string device_key;
  at::ScalarType dtype;
  bool allow_tf32 = false;
  try {
    loader.emplace(o.package);
    const auto metadata = loader->get_metadata();
    device_key = metadata_value(metadata, "AOTI_DEVICE_KEY", o.package);
    allow_tf32 = metadata_value(metadata, "alexconv.allow_tf32", o.package) == "1";
    dtype = dtype_named(metadata_value(metadata, "alexconv.dtype", o.package), o.package);
  } catch (const c10::Error& e) {
    std::cerr << "error: could not load " << o.package << ": " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: could not load " << o.package << ": " << e.what() << "\n";
    return 1;
  }
  if (o.device && *o.device != device_key) {
    std::cerr << "error: " << o.package << " was exported for " << device_key << ", not --device "
              << *o.device << ": a package runs on its own device only (export one for "
              << *o.device << " with alexconv-export MODEL.pt2 --device " << *o.device << ")\n";
    return 2;
  }
  const bool cuda = device_key == "cuda";
  const at::TensorOptions options = at::TensorOptions().device(cuda ? at::kCUDA : at::kCPU).dtype(dtype);
  const double tol = default_tolerance(dtype, allow_tf32);
  const double atol = o.atol.value_or(tol), rtol = o.rtol.value_or(tol);

  const c10::InferenceMode guard;
  // Fresh random input and weights each run (libtorch's generators start from a fixed seed);
  // the seed is printed so that a failure can be replayed.
  const uint64_t seed = o.seed ? static_cast<uint64_t>(*o.seed) : std::random_device{}();
  torch::manual_seed(seed);
  std::vector<at::Tensor> inputs{at::rand({o.batch, 3, o.size, o.size}, options)};
  std::vector<std::pair<std::string, Result>> results;
  at::Tensor weight, bias;
  double t_pkg = 0, t_ref = 0;
  try {
#ifdef ALEXCONV_AOTI_EXTRACT_CONSTANTS
    // The weights the package was exported with, keyed by their names in ModelNew.
    const auto constants = loader->get_runner()->extract_constants_map(/*use_inactive=*/false);
    weight = constant(constants, "conv1.weight", o.package);
    bias = constant(constants, "conv1.bias", o.package);
    if (weight.sizes() != at::IntArrayRef{96, 3, 11, 11} || weight.scalar_type() != dtype)
      throw std::runtime_error(c10::str("conv1.weight is ", weight.scalar_type(), " ", weight.sizes(),
                                        ", not ModelNew's ", dtype, " [96, 3, 11, 11]"));
    results.emplace_back("package weights", check(*loader, inputs, weight, bias, atol, rtol));
#endif
    // New weights through load_constants (the way to update a deployed package's weights; what
    // torch before the runner's extract_constants_map can check): nn.Conv2d's initialisation.
    const double bound = 1.0 / std::sqrt(3.0 * 11 * 11);
    weight = (at::rand({96, 3, 11, 11}, options.dtype(at::kFloat)) * 2 - 1).mul_(bound).to(dtype);
    bias = (at::rand({96}, options.dtype(at::kFloat)) * 2 - 1).mul_(bound).to(dtype);
    std::unordered_map<std::string, at::Tensor> fresh{{"conv1.weight", weight}, {"conv1.bias", bias}};
    loader->load_constants(fresh, /*use_inactive=*/false, /*check_full_update=*/true);
    results.emplace_back("loaded weights", check(*loader, inputs, weight, bias, atol, rtol));

    at::globalContext().setAllowTF32CuDNN(false);  // cuDNN in exact float32, like alexconv's default
    t_pkg = median_ms([&] { loader->run(inputs); }, o.iters, cuda);
    t_ref = median_ms([&] { at::conv2d(inputs[0], weight, bias, {4, 4}, {2, 2}); }, o.iters, cuda);
  } catch (const c10::Error& e) {
    std::cerr << "error: running " << o.package << " failed: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: running " << o.package << " failed: " << e.what() << "\n";
    return 1;
  }

  std::cout << "package " << o.package << ": device " << device_key << ", dtype " << dtype
            << ", allow_tf32 " << allow_tf32 << ", input " << inputs[0].sizes() << " -> output "
            << c10::IntArrayRef(results.back().second.shape) << ", seed " << seed << "\n";
  bool ok = true;
  for (const auto& [what, r] : results) {
    std::cout << "AOTI package, " << what << ": max abs error " << r.max_abs << ", rel norm error "
              << r.rel_norm << (r.ok ? "" : "  MISMATCH") << "\n";
    ok = ok && r.ok;
  }
  std::cout << "median: AOTI package " << t_pkg << " ms, at::conv2d " << t_ref << " ms\n";
  if (!ok) {
    std::cerr << "MISMATCH: the package's output differs from the float64 reference beyond atol="
              << atol << ", rtol=" << rtol << " (or has another shape or dtype)\n";
    return 1;
  }
  std::cout << "OK: the package matches the float64 reference with " << results.size()
            << " weight sets (atol=" << atol << ", rtol=" << rtol << ")\n";
  return 0;
}
