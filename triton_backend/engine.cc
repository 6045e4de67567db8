#include "engine.h"

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/jit/runtime/graph_iterator.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#ifdef DEPLOYBENCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
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
// replay: the backend copies them into the responses before it runs again. An engine that
// cannot be captured (a call the capture refuses) or whose replay differs from its plain run
// is run plainly from then on, said once in the server log: never a wrong graph served.
// `where_faster`: a bucket keeps its graph only where the replay, with the copy of the
// batch into the graph's inputs, took less time than a plain run of the batch at its
// capture (a large batch is not launch-bound, and its copy costs more than the graph saves);
// each bucket's times and choice go to the server log.
class CudaGraphs : public Engine {
 public:
  CudaGraphs(std::unique_ptr<Engine> inner, int64_t max_batch_size, bool where_faster)
      : inner_(std::move(inner)), buckets_(graph_buckets(max_batch_size)),
        where_faster_(where_faster) {}
  bool takes_half() const override { return inner_->takes_half(); }
  bool host_input(size_t i) const override { return inner_->host_input(i); }
  std::optional<TableCounts> table_counts() const override { return inner_->table_counts(); }
  void check_run() override { inner_->check_run(); }
  std::string describe() const override {
    std::string inner = inner_->describe();
    return inner + (inner.empty() ? "" : "; ") + "a CUDA graph per batch bucket up to " +
           std::to_string(buckets_.back());
  }
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    if (!refused_.empty()) return inner_->run(inputs);
    int64_t n = inputs.at(0).size(0);
    auto bucket = std::lower_bound(buckets_.begin(), buckets_.end(), n);
    if (bucket == buckets_.end())
      throw std::runtime_error("batch " + std::to_string(n) + " exceeds the largest graph's " +
                               std::to_string(buckets_.back()));
    if (plain_.count(*bucket)) return inner_->run(inputs);
    Captured& graph = graphs_[*bucket];
    if (!graph.graph && !capture(*bucket, inputs, graph)) return inner_->run(inputs);
    replay(graph, inputs);
    std::vector<at::Tensor> out;
    for (const auto& t : graph.outputs) out.push_back(t.narrow(0, 0, n));
    return out;
  }

 private:
  struct Captured {
    std::vector<at::Tensor> inputs, outputs;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
  };
  // Captures at `bucket` on the example's rows (padded with zeros), warmed up first (a
  // TorchScript executor optimises, ONNX Runtime's arena grows, cuBLAS makes its workspace:
  // none of which a capture permits), then checks one replay against a plain run.
  bool capture(int64_t bucket, const std::vector<at::Tensor>& example, Captured& into) {
    for (const auto& t : example) {
      auto shape = t.sizes().vec();
      shape[0] = bucket;
      into.inputs.push_back(at::zeros(shape, t.options()));
      into.inputs.back().narrow(0, 0, t.size(0)).copy_(t);
    }
    for (int i = 0; i < 3; ++i) inner_->run(into.inputs);
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    try {
      // thread-local: another instance's thread may use CUDA while this one captures
      graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      into.outputs = inner_->run(into.inputs);
      graph->capture_end();
    } catch (const std::exception& e) {
      abandon(*graph);
      return refuse(bucket, e.what());
    }
    // Checked on other rows than the warm-up's and the capture's (theirs reversed), into
    // poisoned outputs, kept before the plain run: a graph that ran nothing, or only a copy
    // of a buffer it did not fill, passed on what memory held from the warm-up (ONNX
    // Runtime's arena hands the capture its warm-up's memory; an H100, 2026-12-07: "The CUDA
    // Graph is empty", kept as 18 times faster than a plain run). An output that is an
    // input (an identity) is the input's rows.
    for (auto& t : into.inputs) t.copy_(t.flip({0}));
    for (auto& t : into.outputs) {
      bool is_input = std::any_of(into.inputs.begin(), into.inputs.end(),
                                  [&](const at::Tensor& x) { return t.is_alias_of(x); });
      if (is_input) continue;
      if (t.is_floating_point())
        t.fill_(std::numeric_limits<double>::quiet_NaN());
      else
        t.fill_(-1);
    }
    graph->replay();
    std::vector<at::Tensor> replayed;
    for (const auto& t : into.outputs) replayed.push_back(t.clone());
    std::vector<at::Tensor> plain = inner_->run(into.inputs);
    std::string differs = difference(replayed, plain);
    if (!differs.empty()) return refuse(bucket, differs);
    into.graph = std::move(graph);
    return !where_faster_ || pays(bucket, example, into);
  }

  static void replay(Captured& graph, const std::vector<at::Tensor>& inputs) {
    for (size_t i = 0; i < inputs.size(); ++i)
      graph.inputs[i].narrow(0, 0, inputs[i].size(0)).copy_(inputs[i], /*non_blocking=*/true);
    graph.graph->replay();
  }

  // Whether the bucket's replay (the batch copied in) beats a plain run of the batch: the
  // fastest of three rounds of five calls each, alternating, on the instance's stream.
  bool pays(int64_t bucket, const std::vector<at::Tensor>& example, Captured& graph) {
    auto stream = c10::cuda::getCurrentCUDAStream();
    auto timed_ms = [&](auto&& work) {
      stream.synchronize();
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 5; ++i) work();
      stream.synchronize();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                 .count() / 5;
    };
    double plain = 1e300, replayed = 1e300;
    for (int round = 0; round < 3; ++round) {
      plain = std::min(plain, timed_ms([&] { inner_->run(example); }));
      replayed = std::min(replayed, timed_ms([&] { replay(graph, example); }));
    }
    bool kept = replayed < plain;
    std::fprintf(stderr,
                 "deploybench: CUDA graph at batch bucket %lld (batch %lld): replay %.3f ms, "
                 "plain run %.3f ms: %s\n",
                 static_cast<long long>(bucket), static_cast<long long>(example.at(0).size(0)),
                 replayed, plain, kept ? "kept" : "not kept, the bucket runs plainly");
    if (!kept) {
      plain_.insert(bucket);
      graphs_.erase(bucket);
    }
    return kept;
  }

  // A capture that failed half-way: the stream out of capture mode, torch's allocator back
  // from the graph's pool, the error cleared (a capture's errors do not poison the context).
  static void abandon(at::cuda::CUDAGraph& graph) {
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    if (stream_capturing()) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream, &partial);
      if (partial != nullptr) cudaGraphDestroy(partial);
    }
    try {
      c10::cuda::CUDACachingAllocator::endAllocateToPool(
          c10::cuda::current_device(), graph.pool());
    } catch (const std::exception&) {  // capture_end got that far
    }
    cudaGetLastError();
  }

  // The largest relative L2 difference of the replay's outputs from the plain run's, where
  // one exceeds 1e-3 (or is not finite where the plain run's is): what a wrong graph shows.
  static std::string difference(const std::vector<at::Tensor>& replayed,
                                const std::vector<at::Tensor>& plain) {
    if (replayed.size() != plain.size()) return "its replay gave another number of outputs";
    for (size_t i = 0; i < plain.size(); ++i) {
      at::Tensor want = plain[i].to(at::kDouble), got = replayed[i].to(at::kDouble);
      double scale = want.norm().item<double>();
      double error = (got - want).norm().item<double>() / std::max(scale, 1e-30);
      if (!(error <= 1e-3))  // NaN fails too
        return "its replay differs from a plain run in output " + std::to_string(i) +
               " (relative L2 " + std::to_string(error) + ")";
    }
    return "";
  }

  bool refuse(int64_t bucket, const std::string& why) {
    refused_ = why;
    graphs_.clear();
    std::fprintf(stderr,
                 "deploybench: CUDA graphs refused at batch bucket %lld, the engine runs "
                 "without them: %s\n",
                 static_cast<long long>(bucket), why.c_str());
    return false;
  }

  std::unique_ptr<Engine> inner_;
  std::vector<int64_t> buckets_;
  bool where_faster_;
  std::map<int64_t, Captured> graphs_;
  std::set<int64_t> plain_;  // buckets whose graph did not pay
  std::string refused_;
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

bool known_precision(const std::string& precision) {
  static const std::set<std::string> known{"fp32", "fp16", "int8", "int8-weight-only", "fp8"};
  return known.count(precision) > 0;
}

std::string precision_refusal(const std::string& precision, at::Device device) {
  // FP8 E4M3 matmuls (torch._scaled_mm): a package built for them fails only at its first
  // call elsewhere, so the instance refuses to load (runners/quantization.py's rule)
  if (precision != "fp8") return "";
  std::string why =
      "precision 'fp8' needs an NVIDIA GPU of compute capability 8.9 or later; ";
  if (!device.is_cuda()) return why + "this instance runs on the CPU";
#ifdef DEPLOYBENCH_CUDA
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, device.index()) != cudaSuccess)
    return why + "the capability of GPU " + std::to_string(device.index()) + " is unknown";
  if (props.major * 10 + props.minor < 89)
    return why + "GPU " + std::to_string(device.index()) + " (" + props.name +
           ") has compute capability " + std::to_string(props.major) + "." +
           std::to_string(props.minor);
#endif
  return "";
}

bool stream_capturing() {
#ifdef DEPLOYBENCH_CUDA
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream().stream(), &status) ==
             cudaSuccess && status != cudaStreamCaptureStatusNone;
#else
  return false;
#endif
}

std::vector<int64_t> graph_buckets(int64_t max_batch_size) {
  std::set<int64_t> sizes;
  for (int64_t b = 1; b / 2 < max_batch_size; b *= 2) sizes.insert(std::min(b, max_batch_size));
  return {sizes.begin(), sizes.end()};
}

std::unique_ptr<Engine> load_torch(const EngineSpec& spec) {
  if (spec.runner == "identity") return std::make_unique<Identity>(spec.outputs, spec.device);
  if (!spec.fp16 && spec.device.is_cuda()) strict_fp32();
  bool graphs = needs_gpu(spec.runner);
  std::unique_ptr<Engine> engine;
  if (spec.runner.rfind("aoti", 0) == 0)
    engine = std::make_unique<Aoti>(spec.path, spec.device, graphs);
  else
    engine = std::make_unique<TorchScript>(spec.path, spec.device, !spec.fp16);
  if (!graphs) return engine;
  if (!spec.device.is_cuda())
    throw std::runtime_error("runner " + spec.runner + " needs a GPU instance");
  return with_cuda_graphs(std::move(engine), spec.max_batch_size, /*where_faster=*/false);
}

std::unique_ptr<Engine> with_cuda_graphs(std::unique_ptr<Engine> engine, int64_t max_batch,
                                         bool where_faster) {
#ifdef DEPLOYBENCH_CUDA
  return std::make_unique<CudaGraphs>(std::move(engine), max_batch, where_faster);
#else
  throw std::runtime_error("CUDA graphs: this backend was built against a torch without CUDA");
#endif
}

}  // namespace deploybench
