// Runs alexconv::conv1 on a random input and checks it against at::conv2d in float64.
// Prints "max abs error E" and exits 0 when E <= 1e-4.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdio>

#include "alexconv/conv1.h"

int main() {
  const at::Tensor x = at::rand({2, 3, 35, 41});
  const at::Tensor w = at::randn({96, 3, 11, 11}) * 0.05;
  const at::Tensor b = at::randn({96});
#if defined(CALL_THROUGH_HEADER)
  const at::Tensor y = alexconv::conv1(x, w, b);
#else
  // No symbol of libalexconv.so referenced: the operator is there only if the
  // library was kept on the link line and registered itself when loaded. A typed call
  // names every argument of the schema (allow_tf32, padding, relu), defaults included.
  const auto op = c10::Dispatcher::singleton()
                      .findSchemaOrThrow("alexconv::conv1", "")
                      .typed<at::Tensor(const at::Tensor&, const at::Tensor&,
                                        const c10::optional<at::Tensor>&, bool, int64_t, bool)>();
  const at::Tensor y = op.call(x, w, b, false, 2, false);
#endif
  const at::Tensor ref = at::conv2d(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble), 4, 2);
  const double err = (y.to(at::kDouble) - ref).abs().max().item<double>();
  std::printf("output [%lld, %lld, %lld, %lld], max abs error %.3g\n", (long long)y.size(0),
              (long long)y.size(1), (long long)y.size(2), (long long)y.size(3), err);
  return err <= 1e-4 ? 0 : 1;
}
