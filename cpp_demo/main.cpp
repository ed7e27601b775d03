// alexconv_demo: runs a TorchScript model saved by alexconv-export (alexconv.export) from
// C++, checks it against at::conv2d in float64 with the module's own parameters,
// calls the header API (alexconv::conv1) too, and reports latency.
//
//   alexconv_demo MODEL.pt [--device cpu|cuda] [--batch N] [--size HW] [--iters K]
//                 [--atol A] [--rtol R] [--seed S] [--input IN.pt] [--reference OUT.pt]
//
// Any other TorchScript model (a whole network after alexconv.convert, say), or any model given
// --input or --reference, runs as it is: on IN.pt (a tensor saved with torch.save) or on
// torch.rand([N, 3, HW, HW]) seeded with S, then compared with OUT.pt (torch.save'd) or, without
// one, reported by its output's checksum (the same seed gives the same input in Python).
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/script.h>
#include <torch/csrc/jit/serialization/pickle.h>  // torch::jit::pickle_load
#include <torch/utils.h>      // torch::manual_seed

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "alexconv/conv1.h"
#include "demo_common.h"

namespace {

using alexconv_demo::default_tolerance;
using alexconv_demo::median_ms;

struct Options {
  std::string model;
  std::string device = "cpu";
  int64_t batch = 8, size = 224, iters = 10;
  std::optional<double> atol, rtol;  // default: by dtype and the model's allow_tf32
  int64_t seed = 0;                   // of the random input of an arbitrary model
  std::string input, reference;       // tensor files (torch.save) for an arbitrary model
};

constexpr const char* kUsage =
    "usage: alexconv_demo MODEL.pt [--device cpu|cuda] [--batch N] [--size HW] "
    "[--iters K] [--atol A] [--rtol R] [--seed S] [--input IN.pt] [--reference OUT.pt]\n";

const alexconv_demo::Cli cli{kUsage};

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    }
    // A path that starts with '-' can be given as ./-name.
    if (a.size() < 2 || a[0] != '-') {
      if (!o.model.empty()) cli.usage("more than one model path given: '" + o.model + "' and '" + a + "'");
      o.model = a;
      continue;
    }
    // Every option takes a value. An unknown one is named as such wherever it stands (even
    // last); a known one is missing its value at the end or when the next word is an option.
    static const char* const kOptions[] = {"--device", "--batch", "--size", "--iters", "--atol",
                                           "--rtol", "--seed", "--input", "--reference"};
    if (std::find(std::begin(kOptions), std::end(kOptions), a) == std::end(kOptions))
      cli.usage("unknown option " + a);
    if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0) cli.usage(a + " needs a value");
    const std::string& v = args[++i];
    if (a == "--device") o.device = v;
    else if (a == "--batch") o.batch = cli.parse_int(a, v, 0);
    else if (a == "--size") o.size = cli.parse_int(a, v, 7);
    else if (a == "--iters") o.iters = cli.parse_int(a, v, 1);
    else if (a == "--atol") o.atol = cli.parse_double(a, v);
    else if (a == "--seed") o.seed = cli.parse_int(a, v, 0);
    else if (a == "--input") o.input = v;
    else if (a == "--reference") o.reference = v;
    else o.rtol = cli.parse_double(a, v);  // --rtol
  }
  if (o.model.empty()) cli.usage("no model path given");
  if (o.device != "cpu" && o.device != "cuda") cli.usage("--device must be cpu or cuda, got " + o.device);
  if (o.device == "cuda" && !torch::cuda::is_available()) cli.usage("--device cuda but no CUDA device is available");
  return o;
}

struct Error {
  double max_abs, rel_norm;
  bool ok;
};

Error compare(const at::Tensor& out, const at::Tensor& ref, double atol, double rtol) {
  const at::Tensor diff = out.to(at::kDouble) - ref;
  const double max_abs = out.numel() ? diff.abs().max().item<double>() : 0.0;
  const double norm = ref.norm().item<double>();
  const double rel = norm > 0 ? diff.norm().item<double>() / norm : diff.norm().item<double>();
  const bool ok = out.sizes() == ref.sizes() &&
                  at::allclose(out.to(at::kDouble), ref, rtol, atol, /*equal_nan=*/false);
  return {max_abs, rel, ok};
}

// The header API follows the op's rules: an invalid call throws c10::Error naming
// the argument, and leaves nothing broken. Two of them: a padding past the op's range, and
// an undefined input (which only C++ callers can pass).
template <class Call>
std::optional<std::string> error_of(const Call& call) {
  try {
    call();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return std::nullopt;
}
struct Rejection {
  const char* what;      // the invalid call
  const char* expected;  // a piece of its message
  std::optional<std::string> message;
};
std::vector<Rejection> header_api_rejections(const at::Tensor& input, const at::Tensor& weight) {
  return {{"padding of 7", "padding must be in [0, 5], got 7",
           error_of([&] { alexconv::conv1(input, weight, c10::nullopt, false, /*padding=*/7); })},
          {"undefined input", "input must be a defined tensor, got an undefined one",
           error_of([&] { alexconv::conv1(at::Tensor(), weight, c10::nullopt, false); })}};
}

// A tensor saved by Python's torch.save.
at::Tensor load_tensor(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot read " + path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const c10::IValue value = torch::jit::pickle_load(bytes);
  if (!value.isTensor()) throw std::runtime_error(path + " holds no tensor (save one with torch.save)");
  return value.toTensor();
}

// Any model: its output on --input or a seeded random input in the dtype of its parameters,
// checked against --reference or reported by checksum.
int run_any_model(torch::jit::Module& module, const Options& o, const torch::Device& device) {
  at::ScalarType dtype = at::kFloat;
  for (const at::Tensor& p : module.parameters()) {
    if (p.is_floating_point()) {
      dtype = p.scalar_type();
      break;
    }
  }
  const c10::InferenceMode guard;
  at::Tensor input;
  if (!o.input.empty()) {
    input = load_tensor(o.input).to(device);
  } else {
    torch::manual_seed(uint64_t(o.seed));
    input = torch::rand({o.batch, 3, o.size, o.size}).to(device, dtype);  // CPU draws: as Python's
  }
  const c10::IValue result = module.forward({input});
  const at::Tensor out = (result.isTuple() ? result.toTuple()->elements()[0] : result).toTensor();
  const double ms = median_ms([&] { module.forward({input}); }, o.iters, device.is_cuda());
  const at::Tensor d = out.to(at::kDouble);
  std::cout << "device " << o.device << ", input " << input.sizes() << " " << input.scalar_type()
            << " -> output " << out.sizes() << " " << out.scalar_type() << ", median " << ms << " ms\n"
            << "checksum: sum " << std::setprecision(17) << d.sum().item<double>() << ", abs sum "
            << d.abs().sum().item<double>() << std::setprecision(6) << "\n";
  if (o.reference.empty()) return 0;
  const double tol = default_tolerance(out.scalar_type(), false);
  const double atol = o.atol.value_or(tol), rtol = o.rtol.value_or(tol);
  const Error e = compare(out, load_tensor(o.reference).to(device, at::kDouble), atol, rtol);
  std::cout << "against " << o.reference << ": max abs error " << e.max_abs << ", rel norm error "
            << e.rel_norm << "\n";
  if (!e.ok) {
    std::cerr << "MISMATCH: output differs from the reference beyond atol=" << atol << ", rtol=" << rtol << "\n";
    return 1;
  }
  std::cout << "OK: output matches the reference (atol=" << atol << ", rtol=" << rtol << ")\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const bool cuda = o.device == "cuda";
  const torch::Device device(cuda ? torch::kCUDA : torch::kCPU);

  torch::jit::Module module;
  try {
    module = torch::jit::load(o.model, device);
  } catch (const c10::Error& e) {
    std::cerr << "error: could not load " << o.model << ": " << e.what_without_backtrace() << "\n";
    return 1;
  }
  module.eval();
  // ModelNew (a conv1 with its weight) gets the float64 check of both paths; anything else, or
  // a model given files to compare, runs as it is.
  const bool model_new = module.hasattr("conv1") && module.attr("conv1").isModule() &&
                         module.attr("conv1").toModule().hasattr("weight");
  if (!model_new || !o.input.empty() || !o.reference.empty()) {
    try {
      return run_any_model(module, o, device);
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      return 1;
    }
  }
  const torch::jit::Module conv = module.attr("conv1").toModule();
  const at::Tensor weight = conv.attr("weight").toTensor();
  const c10::IValue bias_value = conv.attr("bias");
  const c10::optional<at::Tensor> bias =
      bias_value.isTensor() ? c10::optional<at::Tensor>(bias_value.toTensor()) : c10::nullopt;

  const bool allow_tf32 = module.hasattr("allow_tf32") && module.attr("allow_tf32").toBool();
  const double tol = default_tolerance(weight.scalar_type(), allow_tf32);
  const double atol = o.atol.value_or(tol), rtol = o.rtol.value_or(tol);

  const c10::InferenceMode guard;
  const at::Tensor input = torch::rand({o.batch, 3, o.size, o.size}, weight.options());
  // First the invalid calls; the valid ones after them must still be right.
  const std::vector<Rejection> rejections = header_api_rejections(input, weight);
  const at::Tensor out = module.forward({input}).toTensor();
  const at::Tensor out_api = alexconv::conv1(input, weight, bias, allow_tf32);
  // The reference in float64: far more accurate than either path under test.
  const at::Tensor ref = at::conv2d(input.to(at::kDouble), weight.to(at::kDouble),
                                    bias ? bias->to(at::kDouble) : at::Tensor(), {4, 4}, {2, 2});

  const Error e_model = compare(out, ref, atol, rtol), e_api = compare(out_api, ref, atol, rtol);
  at::globalContext().setAllowTF32CuDNN(false);  // cuDNN in exact float32, like alexconv's default
  const double t_model = median_ms([&] { module.forward({input}); }, o.iters, cuda);
  const double t_api = median_ms([&] { alexconv::conv1(input, weight, bias, allow_tf32); }, o.iters, cuda);
  // ATen may have no kernel for the dtype here (torch 1.13: no float16 convolution on CPU):
  // the timing is then left out, the check above stands.
  std::ostringstream t_ref;
  try {
    t_ref << median_ms(
        [&] { at::conv2d(input, weight, bias ? *bias : at::Tensor(), {4, 4}, {2, 2}); }, o.iters, cuda) << " ms";
  } catch (const c10::Error& e) {
    t_ref << "not run (" << e.what_without_backtrace() << ")";
  }

  std::cout << "device " << o.device << ", dtype " << weight.scalar_type()
            << ", allow_tf32 " << allow_tf32 << ", input "
            << input.sizes() << " -> output " << out.sizes() << "\n"
            << "scripted model : max abs error " << e_model.max_abs << ", rel norm error "
            << e_model.rel_norm << ", median " << t_model << " ms\n"
            << "alexconv::conv1: max abs error " << e_api.max_abs << ", rel norm error "
            << e_api.rel_norm << ", median " << t_api << " ms\n"
            << "at::conv2d     : median " << t_ref.str() << "\n";
  for (const Rejection& r : rejections) {
    if (!r.message || r.message->find(r.expected) == std::string::npos) {
      std::cerr << "MISMATCH: the header API accepted a call with a " << r.what
                << " or named no argument: " << r.message.value_or("(no error)") << "\n";
      return 1;
    }
    std::cout << "invalid call  : " << r.what << " rejected with \"" << *r.message << "\"\n";
  }
  if (!e_model.ok || !e_api.ok) {
    std::cerr << "MISMATCH: output differs from the float64 reference beyond atol=" << atol
              << ", rtol=" << rtol << "\n";
    return 1;
  }
  std::cout << "OK: both paths match the float64 reference (atol=" << atol << ", rtol=" << rtol
            << ")\n";
  return 0;
}
