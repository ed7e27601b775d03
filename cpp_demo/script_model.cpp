// alexconv_script_model: writes a TorchScript ModelNew (the module alexconv-export
// saves from Python: submodule conv1 with weight [96, 3, 11, 11] and bias [96], attribute
// allow_tf32, forward calling torch.ops.alexconv.conv1) from C++, with torch::jit compiling
// its forward. For a libtorch with no Python beside it: scripts/legacy/check_legacy.sh saves a
// model with libtorch 1.13 and runs it with alexconv_demo (a .pt file saved by a newer torch
// carries a file-format version that torch 1.13 refuses to load).
//
//   alexconv_script_model OUT.pt [--dtype float32|float16|bfloat16] [--seed N]
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>
#include <torch/script.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <cmath>
#include <iostream>
#include <string>

namespace {

// ModelNew.forward (python/alexconv/models.py), as TorchScript source; `alexconv` is the
// operator namespace (torch.ops.alexconv in Python), which the resolver below provides.
constexpr const char* kForward = R"(
def forward(self, x: Tensor) -> Tensor:
    return alexconv.conv1(x, self.conv1.weight, self.conv1.bias, allow_tf32=self.allow_tf32)
)";

// torch::jit's C++ frontend knows `torch` (ATen's operators) only; Python's frontend
// resolves torch.ops.<namespace> to the same builtin module as this.
struct OpsResolver : torch::jit::NativeResolver {
  std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string& name,
                                                        torch::jit::GraphFunction& m,
                                                        const torch::jit::SourceRange& loc) override {
    if (name == "alexconv") return std::make_shared<torch::jit::BuiltinModule>("alexconv");
    return torch::jit::NativeResolver::resolveValue(name, m, loc);
  }
};

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "error: " << error
            << "\nusage: alexconv_script_model OUT.pt [--dtype float32|float16|bfloat16] [--seed N]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, dtype_name = "float32";
  int64_t seed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--dtype" || a == "--seed") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--dtype") dtype_name = v;
      else try { seed = std::stoll(v); } catch (const std::exception&) { usage("--seed needs an integer, got " + v); }
    } else if (a.rfind("--", 0) == 0) {
      usage("unknown option or missing value: " + a);
    } else if (out.empty()) {
      out = a;
    } else {
      usage("more than one output path");
    }
  }
  if (out.empty()) usage("no output path given");
  const at::ScalarType dtype = dtype_name == "float32"    ? at::kFloat
                               : dtype_name == "float16"  ? at::kHalf
                               : dtype_name == "bfloat16" ? at::kBFloat16
                                                          : (usage("unknown --dtype " + dtype_name), at::kFloat);

  // nn.Conv2d's default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = 3*11*11.
  torch::manual_seed(seed);
  const double bound = 1.0 / std::sqrt(3.0 * 11 * 11);
  torch::jit::Module conv("__torch__.torch.nn.modules.conv.Conv2d");
  conv.register_parameter("weight", (torch::rand({96, 3, 11, 11}) * 2 - 1).mul_(bound).to(dtype), false);
  conv.register_parameter("bias", (torch::rand({96}) * 2 - 1).mul_(bound).to(dtype), false);

  torch::jit::Module model("__torch__.alexconv.models.ModelNew");
  model.register_module("conv1", conv);
  model.register_attribute("allow_tf32", c10::BoolType::get(), false);
  try {
    model.define(kForward, std::make_shared<OpsResolver>());
    model.eval();
    model.save(out);
  } catch (const std::exception& e) {  // c10::Error, or torch::jit::ErrorReport from define
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  std::cout << "saved scripted ModelNew (" << dtype_name << ", allow_tf32=False, torch "
            << TORCH_VERSION << ") to " << out << "\n";
  return 0;
}
