#include "engine.h"

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/jit/runtime/graph_iterator.h>
#include <torch/script.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#ifdef DEPLOYBENCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace deploybench {
namespace {

std::vector<at::Tensor> tensors_of(const c10::IValue& value) {
  if (value.isTensor()) return {value.toTensor()};
  std::vector<at::Tensor> out;
  if (value.isTuple()) {
    for (const auto& item : value.toTupleRef().elements()) out.push_back(item.toTensor());
    return out;
  }
  if (value.isList()) {
    for (const auto& item : value.toListRef()) out.push_back(item.toTensor());
    return out;
  }
  throw std::runtime_error("the TorchScript module returned " + value.tagKind() +
                           ", not a tensor or a tuple or list of tensors");
}

}  // namespace

int strict_convolutions(torch::jit::Module& module) {
  int changed = 0;
  static const c10::Symbol convolution = c10::Symbol::fromQualString("aten::_convolution");
  constexpr size_t kAllowTF32 = 12;  // _convolution(input, ..., cudnn_enabled, allow_tf32)
  for (const torch::jit::Module& part : module.modules())
    for (const torch::jit::Method& method : part.get_methods()) {
      std::shared_ptr<torch::jit::Graph> graph = method.graph();
      torch::jit::DepthFirstGraphNodeIterator nodes(graph);
      while (torch::jit::Node* node = nodes.next()) {
        if (node->kind() != convolution || node->inputs().size() <= kAllowTF32) continue;
        torch::jit::WithInsertPoint here(node);
        node->replaceInput(kAllowTF32, graph->insertConstant(false));
        ++changed;
      }
    }
  return changed;
}

namespace {

class TorchScript : public Engine {
 public:
  TorchScript(const std::string& path, at::Device device, bool strict)
      : module_(torch::jit::load(path, device)) {
    module_.eval();
    if (strict) strict_convolutions(module_);
  }
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    return tensors_of(module_.forward(std::vector<c10::IValue>(inputs.begin(), inputs.end())));
  }

 private:
  torch::jit::Module module_;
};

class Aoti : public Engine {
 public:
  // single_threaded: the package's container otherwise waits on its last run's event
  // before each run, which a capturing stream does not permit (runners/aoti.py).
  Aoti(const std::string& path, at::Device device, bool single_threaded)
      : loader_(path, "model", single_threaded, 1, device.is_cuda() ? device.index() : -1),
        device_(device) {}
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
#ifdef DEPLOYBENCH_CUDA
    if (device_.is_cuda())
      return loader_.run(inputs, c10::cuda::getCurrentCUDAStream(device_.index()).stream());
#endif
    return loader_.run(inputs);
  }

 private:
  torch::inductor::AOTIModelPackageLoader loader_;
  at::Device device_;
};

class Identity : public Engine {
 public:
  Identity(std::vector<TensorSpec> outputs, at::Device device)
      : outputs_(std::move(outputs)), device_(device) {}
  // It reads nothing: its inputs stay where the requests put them, and its zeros are made
  // there too, so that its cost is the serving path's, no upload or download of its own
  // (what a real model pays for those, its native measurement pays too).
  bool takes_half() const override { return false; }
  bool reads_inputs() const override { return false; }
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    int64_t n = inputs.empty() ? 1 : inputs[0].size(0);
    at::Device where = inputs.empty() ? device_ : inputs[0].device();
    std::vector<at::Tensor> out;
    for (const auto& spec : outputs_) {
      std::vector<int64_t> shape{n};
      for (int64_t d : spec.dims) shape.push_back(d < 0 ? 1 : d);
      out.push_back(at::zeros(shape, at::TensorOptions().dtype(spec.dtype).device(where)));
    }
    return out;
  }

 private:
  std::vector<TensorSpec> outputs_;
  at::Device device_;
};

#ifdef DEPLOYBENCH_CUDA
// Replays one CUDA graph per batch bucket: a batch is padded to its bucket, so any batch
// the dynamic batcher forms reuses a captured graph, and a replay costs one launch instead
// of hundreds. Outputs are views of the graph's static buffers, overwritten by the next
// replay: the backend copies them into the responses before it runs again.
class CudaGraphs : public Engine {
 public:
  CudaGraphs(std::unique_ptr<Engine> inner, int64_t max_batch_size)
      : inner_(std::move(inner)), buckets_(graph_buckets(max_batch_size)) {}
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    int64_t n = inputs.at(0).size(0);
    auto bucket = std::lower_bound(buckets_.begin(), buckets_.end(), n);
    if (bucket == buckets_.end())
      throw std::runtime_error("batch " + std::to_string(n) + " exceeds the largest graph's " +
                               std::to_string(buckets_.back()));
    Captured& graph = graphs_[*bucket];
    if (!graph.graph) capture(*bucket, inputs, graph);
    for (size_t i = 0; i < inputs.size(); ++i)
      graph.inputs[i].narrow(0, 0, n).copy_(inputs[i], /*non_blocking=*/true);
    graph.graph->replay();
    std::vector<at::Tensor> out;
    for (const auto& t : graph.outputs) out.push_back(t.narrow(0, 0, n));
    return out;
  }

 private:
  struct Captured {
    std::vector<at::Tensor> inputs, outputs;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
  };
  void capture(int64_t bucket, const std::vector<at::Tensor>& example, Captured& into) {
    for (const auto& t : example) {
      auto shape = t.sizes().vec();
      shape[0] = bucket;
      into.inputs.push_back(at::zeros(shape, t.options()));
    }
    for (int i = 0; i < 3; ++i) inner_->run(into.inputs);  // a TorchScript executor optimises
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    // thread-local: another instance's thread may use CUDA while this one captures
    graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    into.outputs = inner_->run(into.inputs);
    graph->capture_end();
    into.graph = std::move(graph);
  }

  std::unique_ptr<Engine> inner_;
  std::vector<int64_t> buckets_;
  std::map<int64_t, Captured> graphs_;
};
#endif

}  // namespace

bool known_runner(const std::string& runner) {
  static const std::set<std::string> known{"torch",       "torch-cudagraph", "aoti",
                                           "aoti-cudagraph", "onnxruntime", "embeddings",
                                           "identity"};
  return known.count(runner) > 0;
}

void strict_fp32() {
  // per operation: the CUDA backend's convolutions and RNNs default to TF32 of their own
  // (torch 2.9 and later), which the old all-of-cuDNN switch leaves as they are
  for (at::Float32Op op : {at::Float32Op::CONV, at::Float32Op::RNN, at::Float32Op::MATMUL})
    at::globalContext().setFloat32Precision(at::Float32Backend::CUDA, op,
                                            at::Float32Precision::IEEE);
}

bool needs_gpu(const std::string& runner) {
  return runner == "torch-cudagraph" || runner == "aoti-cudagraph";
}

std::vector<int64_t> graph_buckets(int64_t max_batch_size) {
  std::set<int64_t> sizes;
  for (int64_t b = 1; b / 2 < max_batch_size; b *= 2) sizes.insert(std::min(b, max_batch_size));
  return {sizes.begin(), sizes.end()};
}

std::unique_ptr<Engine> load_engine(const EngineSpec& spec) {
  if (!known_runner(spec.runner)) throw std::runtime_error("unknown runner '" + spec.runner + "'");
  if (spec.runner == "identity") return std::make_unique<Identity>(spec.outputs, spec.device);
  if (spec.runner == "onnxruntime") return load_onnxruntime(spec);
  if (spec.runner == "embeddings") return load_embeddings(spec);
  if (!spec.fp16 && spec.device.is_cuda()) strict_fp32();
  bool graphs = needs_gpu(spec.runner);
  std::unique_ptr<Engine> engine;
  if (spec.runner.rfind("aoti", 0) == 0)
    engine = std::make_unique<Aoti>(spec.path, spec.device, graphs);
  else
    engine = std::make_unique<TorchScript>(spec.path, spec.device, !spec.fp16);
  if (!graphs) return engine;
#ifdef DEPLOYBENCH_CUDA
  if (!spec.device.is_cuda())
    throw std::runtime_error("runner " + spec.runner + " needs a GPU instance");
  return std::make_unique<CudaGraphs>(std::move(engine), spec.max_batch_size);
#else
  throw std::runtime_error("runner " + spec.runner +
                           " needs CUDA graphs: this backend was built against a torch "
                           "without CUDA");
#endif
}

}  // namespace deploybench
