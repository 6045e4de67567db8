// The engines the backend runs a model with, behind one interface: TorchScript
// (torch::jit), an AOTInductor package (AOTIModelPackageLoader), either one replayed as CUDA
// graphs (one graph per power-of-two batch bucket), ONNX Runtime (its C API: CPU or CUDA
// execution provider), a recommender's embedding lookups (embeddings.h), and the identity
// (zeros of the outputs, at no cost: the floor of serving). They run on the current device
// and CUDA stream.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace deploybench {

struct TensorSpec {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> dims;  // without the batch dimension; -1: any size
};

struct EngineSpec {
  std::string runner;  // torch, torch-cudagraph, aoti, aoti-cudagraph, onnxruntime,
                       // embeddings, identity
  std::string path;    // the converted artifact (the embeddings: their folder)
  std::string precision = "fp32";  // a quantized one's package takes FP32 inputs
  bool fp16 = false;   // an FP16 model: floating inputs are cast to half for it
  at::Device device = at::kCPU;
  void* stream = nullptr;  // the instance's CUDA stream (ONNX Runtime runs on it)
  int threads = 1;         // intra-op threads of a CPU instance
  int64_t max_batch_size = 0;
  std::vector<TensorSpec> inputs, outputs;  // ONNX Runtime binds by name; the identity's zeros
  std::map<std::string, std::string> parameters;  // the config's, as strings
};

// Counts an engine keeps per table (an embedding store's lookups and device hits, since load),
// which the instance reports as Triton metrics.
struct TableCounts {
  const std::vector<uint64_t>* lookups = nullptr;
  const std::vector<uint64_t>* hits = nullptr;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Floating inputs of an FP16 model are cast to half before run().
  virtual bool takes_half() const { return true; }
  // Whether run() reads its inputs' values (else it gets them uninitialised, where they lie).
  virtual bool reads_inputs() const { return true; }
  // Whether run() takes input `i` in host memory, wherever the engine runs (a value it reads
  // on the host, as the embeddings' key count: no read back from the device for it).
  virtual bool host_input(size_t i) const { return false; }
  virtual std::optional<TableCounts> table_counts() const { return std::nullopt; }
  // What it loaded, for the server log.
  virtual std::string describe() const { return ""; }
  virtual std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) = 0;
  // Checks of the last run whose results reach the host with the run's own synchronisation
  // (no wait of their own): called once the instance synchronised the run; throws to fail
  // the run's requests.
  virtual void check_run() {}
};

// The runners this backend serves, and whether one needs a GPU instance.
bool known_runner(const std::string& runner);
bool needs_gpu(const std::string& runner);
// The precisions of a configuration key (deploybench.backends.PRECISIONS), and why `device`
// cannot run `precision` (fp8: a GPU of compute capability 8.9 or later), or "".
bool known_precision(const std::string& precision);
std::string precision_refusal(const std::string& precision, at::Device device);

// The engine of `spec`; throws with the reason where it cannot load (load_engine.cc).
std::unique_ptr<Engine> load_engine(const EngineSpec& spec);
// The engines it picks from: torch's (TorchScript, AOTInductor, the identity; engine.cc),
// ONNX Runtime's (onnxruntime_engine.cc), the embedding store (embeddings.cc).
std::unique_ptr<Engine> load_torch(const EngineSpec& spec);
std::unique_ptr<Engine> load_onnxruntime(const EngineSpec& spec);
std::unique_ptr<Engine> load_embeddings(const EngineSpec& spec);

// FP32 means FP32 on a GPU: TF32 off for cuDNN (convolutions, RNNs) and cuBLAS matmuls, as
// the python runners have it. The flags are the process's, so every model of the server runs
// strict once an FP32 one loads (a server measures one configuration, and its floor).
void strict_fp32();

// A trace records whether each convolution may use TF32 as a constant of its graph (the
// global flag's value when it was traced: on, by default), which no setting at run time
// changes: an FP32 model's are made strict, in every method of every submodule. Returns how
// many it changed.
int strict_convolutions(torch::jit::Module& module);

// `engine` replayed as CUDA graphs, one per batch bucket up to `max_batch` (its run on the
// current stream: the instance's), checked against a plain run at each capture;
// `where_faster`: a bucket keeps its graph only where its replay beat a plain run there.
std::unique_ptr<Engine> with_cuda_graphs(std::unique_ptr<Engine> engine, int64_t max_batch,
                                         bool where_faster);

// Whether the current CUDA stream is capturing a graph (false without CUDA): what a capture
// refuses (a wait, a host copy) must not happen then.
bool stream_capturing();

// The batch sizes a CUDA graph is captured at: powers of two up to the max batch size, and it.
std::vector<int64_t> graph_buckets(int64_t max_batch_size);

}  // namespace deploybench
