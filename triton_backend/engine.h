// The engines the backend runs a model with, behind one interface: TorchScript
// (torch::jit), an AOTInductor package (AOTIModelPackageLoader), either one replayed as CUDA
// graphs (one graph per power-of-two batch bucket), and the identity (zeros of the outputs,
// at no cost: the floor of serving). They run on the current device and CUDA stream.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace deploybench {

struct TensorSpec {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> dims;  // without the batch dimension; -1: any size
};

struct EngineSpec {
  std::string runner;  // torch, torch-cudagraph, aoti, aoti-cudagraph, identity
  std::string path;    // the converted artifact
  bool fp16 = false;   // an FP16 model: floating inputs are cast to half for it
  at::Device device = at::kCPU;
  int64_t max_batch_size = 0;
  std::vector<TensorSpec> outputs;  // the identity's zeros
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Floating inputs of an FP16 model are cast to half before run().
  virtual bool takes_half() const { return true; }
  // Whether run() reads its inputs' values (else it gets them uninitialised, where they lie).
  virtual bool reads_inputs() const { return true; }
  virtual std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) = 0;
};

// The runners this backend serves, and whether one needs a GPU instance.
bool known_runner(const std::string& runner);
bool needs_gpu(const std::string& runner);

// The engine of `spec`; throws with the reason where it cannot load.
std::unique_ptr<Engine> load_engine(const EngineSpec& spec);

// The batch sizes a CUDA graph is captured at: powers of two up to the max batch size, and it.
std::vector<int64_t> graph_buckets(int64_t max_batch_size);

}  // namespace deploybench
