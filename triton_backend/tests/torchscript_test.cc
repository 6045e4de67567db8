#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/runtime/graph_iterator.h>
#include <torch/script.h>

#include <cstdlib>

#include "../engine.h"

#include "unit.h"

namespace deploybench::unit {

// Convolutions of a trace (DEPLOYBENCH_TEST_TRACE: made with TF32 allowed, as torch traces
// by default) that may use TF32, over every method of every submodule.
static int convolutions_allowing_tf32(torch::jit::Module& module) {
  int found = 0;
  for (const torch::jit::Module& part : module.modules())
    for (const torch::jit::Method& method : part.get_methods()) {
      std::shared_ptr<torch::jit::Graph> graph = method.graph();
      torch::jit::DepthFirstGraphNodeIterator nodes(graph);
      while (torch::jit::Node* node = nodes.next())
        if (node->kind().toQualString() == std::string("aten::_convolution"))
          found += torch::jit::toIValue(node->input(12))->toBool();
    }
  return found;
}

void test_strict_convolutions() {
  const char* path = std::getenv("DEPLOYBENCH_TEST_TRACE");
  if (path == nullptr) return;  // test_cpp_unit.py makes one
  torch::jit::Module module = torch::jit::load(path);
  at::Tensor x = at::randn({2, 4, 16});
  at::Tensor before = module.forward({x}).toTensor();
  int allowing = convolutions_allowing_tf32(module);
  EXPECT(allowing == 2);  // a convolution of its own and one of a submodule
  EXPECT(strict_convolutions(module) == allowing);
  EXPECT(convolutions_allowing_tf32(module) == 0);
  EXPECT(at::equal(module.forward({x}).toTensor(), before));  // on the CPU: the same numbers
}

}  // namespace deploybench::unit
