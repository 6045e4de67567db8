// One model instance: its engine on its device (and CUDA stream), and what an execution
// does with the requests Triton hands it: their inputs gathered into one batch (read in
// place where they already lie where the engine runs), the engine run once, its outputs
// scattered back into each request's response in the memory Triton gives for it, and
// statistics reported for every request and for the batch. A batch that fails before any
// output is written is run again request by request, so that one request's bad value (an
// index out of range) fails that request alone.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#ifdef DEPLOYBENCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "engine.h"
#include "host_copy.h"
#include "metrics.h"
#include "model.h"
#include "region_guard.h"
#include "triton_api.h"

namespace deploybench {

// Why a request fails whose host buffer lies in a truncated region (region_guard.h).
extern const char* const kTruncated;

class Instance {
 public:
  // `engine`: one made elsewhere (the unit tests'); by default the model's, loaded here.
  Instance(TRITONBACKEND_ModelInstance* triton, const ModelSpec& model, at::Device device,
           std::unique_ptr<Engine> engine = nullptr);
  const Engine& engine() const { return *engine_; }
  void execute(TRITONBACKEND_Request** requests, uint32_t count);

 private:
  struct Request {
    TRITONBACKEND_Request* request = nullptr;
    TRITONBACKEND_Response* response = nullptr;
    std::vector<std::vector<int64_t>> shapes;  // each input's, as sent
    int64_t batch = 1;
    std::string error;  // why it fails, where it does
    TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INVALID_ARG;  // the request's fault
  };
  struct Times {
    uint64_t exec_start = 0, compute_start = 0, compute_end = 0, exec_end = 0;
  };

  void read_request(Request& r);
  void run_group(const std::vector<Request*>& group, uint64_t exec_start);
  void watch(const void* data, uint64_t bytes, const std::string& what);
  std::string truncated() const;  // why the group failed where a watched read faulted
  std::vector<at::Tensor> gather(const std::vector<Request*>& group, int64_t total,
                                 bool* copied);
  std::vector<at::Tensor> placeholders(const std::vector<Request*>& group, int64_t total);
  std::vector<at::Tensor> checked_outputs(std::vector<at::Tensor> outputs, int64_t total);
  void scatter(const std::vector<Request*>& group, const std::vector<at::Tensor>& outputs);
  void finish(Request& r, const Times& times);
  at::Tensor& pinned(at::Tensor& buffer, int64_t bytes);
  void synchronize();
  void profile(const Times& times, int64_t samples);

  TRITONBACKEND_ModelInstance* triton_;
  const ModelSpec& model_;
  at::Device device_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<TableMetrics> metrics_;  // an engine's per-table counts, where it keeps some
  at::Tensor staging_in_, staging_out_;  // pinned host memory of a GPU instance
  std::unique_ptr<HostCopier> copier_;
  RegionWatch region_watch_;     // the host buffers of the group it runs, where one is a
  std::vector<Range> watched_;   // client's shared-memory region that may be truncated
  std::vector<std::string> watched_what_;
  bool threads_set_ = false;
  // DEPLOYBENCH_PROFILE_EVERY=N: every N executions, the mean time of their phases in the
  // server log (gathering the inputs, running the model, scattering the outputs) with the
  // model's name and mean batch, as the python backend's model file reports it
  // (scripts/benchmarks/bench_served_variants.py reads both)
  int64_t profile_every_ = 0, executions_ = 0, samples_ = 0;
  double phases_ms_[3] = {0, 0, 0};
#ifdef DEPLOYBENCH_CUDA
  std::unique_ptr<c10::cuda::CUDAStream> stream_;
#endif
};

}  // namespace deploybench
