// An instance's executions: the requests read and checked, grouped, run as one batch, each
// answered (an error response where it fails) with its statistics reported, and released.
#include "instance.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "util.h"

#ifdef DEPLOYBENCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#endif

namespace deploybench {

Instance::Instance(TRITONBACKEND_ModelInstance* triton, const ModelSpec& model,
                   at::Device device, std::unique_ptr<Engine> engine)
    : triton_(triton), model_(model), device_(device), engine_(std::move(engine)) {
#ifdef DEPLOYBENCH_CUDA
  std::optional<c10::cuda::CUDAGuard> guard;
  if (device_.is_cuda()) {
    guard.emplace(device_);
    // a stream of its own, so that two instances on one GPU run side by side
    stream_ = std::make_unique<c10::cuda::CUDAStream>(
        c10::cuda::getStreamFromPool(false, device_.index()));
  }
#endif
  if (!engine_) {
    EngineSpec spec = model_.engine(device_);
#ifdef DEPLOYBENCH_CUDA
    if (stream_) spec.stream = stream_->stream();
#endif
    engine_ = load_engine(spec);
  }
  // A CPU instance copies with its intra-op threads; a GPU instance's copies (requests into
  // the pinned staging buffer, responses out of it) take up to 8 of the cores it may use.
  copier_ = std::make_unique<HostCopier>(device_.is_cuda() ? std::min(8, usable_cores())
                                                           : model_.cpu_threads);
  if (auto counts = engine_->table_counts())
    metrics_ = std::make_unique<TableMetrics>(model_.name, counts->lookups->size());
  const char* every = std::getenv("DEPLOYBENCH_PROFILE_EVERY");
  profile_every_ = every ? std::max<int64_t>(0, std::strtoll(every, nullptr, 10)) : 0;
}

void Instance::profile(const Times& t, int64_t samples) {
  if (profile_every_ <= 0) return;
  samples_ += samples;
  phases_ms_[0] += (t.compute_start - t.exec_start) / 1e6;
  phases_ms_[1] += (t.compute_end - t.compute_start) / 1e6;
  phases_ms_[2] += (t.exec_end - t.compute_end) / 1e6;
  if (++executions_ % profile_every_) return;
  char text[320];
  std::snprintf(text, sizeof text,
                "deploybench profile: model '%s', %lld executions of %.0f samples on average "
                "(host copies over %d threads), mean ms: inputs %.3f, run %.3f, outputs %.3f",
                model_.name.c_str(), static_cast<long long>(profile_every_),
                static_cast<double>(samples_) / profile_every_, copier_->threads(),
                phases_ms_[0] / profile_every_, phases_ms_[1] / profile_every_,
                phases_ms_[2] / profile_every_);
  failed(TRITONSERVER_LogMessage(TRITONSERVER_LOG_INFO, __FILE__, __LINE__, text));
  phases_ms_[0] = phases_ms_[1] = phases_ms_[2] = 0;
  samples_ = 0;
}

void Instance::synchronize() {
#ifdef DEPLOYBENCH_CUDA
  if (stream_) stream_->synchronize();
#endif
}

at::Tensor& Instance::pinned(at::Tensor& buffer, int64_t bytes) {
  if (!buffer.defined() || buffer.numel() < bytes) {
    int64_t size = std::max<int64_t>(bytes, buffer.defined() ? 2 * buffer.numel() : 0);
    buffer = at::empty({size}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  }
  return buffer;
}

void Instance::read_request(Request& r) {
  bool batching = model_.max_batch_size > 0;
  for (const TensorSpec& spec : model_.inputs) {
    TRITONBACKEND_Input* input = nullptr;
    std::string missing = failed(TRITONBACKEND_RequestInput(r.request, spec.name.c_str(), &input));
    if (!missing.empty()) {
      r.error = "input '" + spec.name + "' is missing: " + missing;
      return;
    }
    TRITONSERVER_DataType type;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    check(TRITONBACKEND_InputProperties(input, nullptr, &type, &shape, &dims, nullptr, nullptr),
          "input '" + spec.name + "'");
    if (type != triton_type(spec.dtype)) {
      r.error = "input '" + spec.name + "' has data type " + type_name(type) +
                "; the model's config declares " + type_name(triton_type(spec.dtype));
      return;
    }
    r.shapes.emplace_back(shape, shape + dims);
    if (dims != spec.dims.size() + (batching ? 1 : 0)) {
      r.error = "input '" + spec.name + "' has shape " + shape_text(r.shapes.back()) +
                ", not the config's dims " + shape_text(spec.dims) +
                (batching ? " after the batch dimension" : "");
      return;
    }
  }
  if (batching && !r.shapes.empty()) {
    r.batch = r.shapes[0].at(0);
    for (size_t i = 1; i < r.shapes.size(); ++i)
      if (r.shapes[i].at(0) != r.batch)
        r.error = "inputs '" + model_.inputs[0].name + "' and '" + model_.inputs[i].name +
                  "' differ in their batch size (" + std::to_string(r.batch) + " and " +
                  std::to_string(r.shapes[i][0]) + ")";
  }
}

void Instance::execute(TRITONBACKEND_Request** requests, uint32_t count) {
  uint64_t start = now_ns();
  if (!threads_set_) {  // on the instance's own thread: its intra-op pool
    if (!device_.is_cuda()) at::set_num_threads(model_.cpu_threads);
    threads_set_ = true;
  }
  std::vector<Request> all(count);
  for (uint32_t i = 0; i < count; ++i) {
    all[i].request = requests[i];
    all[i].error = failed(TRITONBACKEND_ResponseNew(&all[i].response, requests[i]));
    if (!all[i].error.empty()) continue;
    try {
      read_request(all[i]);
    } catch (const std::exception& e) {
      all[i].error = e.what();
    }
  }
  // One engine run per group of requests whose samples have the same shapes.
  auto same_samples = [](const Request& a, const Request& b) {
    for (size_t k = 0; k < a.shapes.size(); ++k)
      if (!std::equal(a.shapes[k].begin() + 1, a.shapes[k].end(), b.shapes[k].begin() + 1,
                      b.shapes[k].end()))
        return false;
    return true;
  };
  std::vector<bool> taken(count, false);
  for (uint32_t i = 0; i < count; ++i) {
    if (taken[i]) continue;
    taken[i] = true;
    if (!all[i].error.empty()) {
      finish(all[i], Times{});
      continue;
    }
    std::vector<Request*> group{&all[i]};
    for (uint32_t j = i + 1; model_.max_batch_size > 0 && j < count; ++j)
      if (!taken[j] && all[j].error.empty() && same_samples(all[i], all[j])) {
        group.push_back(&all[j]);
        taken[j] = true;
      }
    run_group(group, start);
    start = now_ns();
  }
}

extern const char* const kTruncated =
    "lies in a shared-memory region that was truncated while the server read it (its lost "
    "pages read as zeros now): register the region again";

void Instance::watch(const void* data, uint64_t bytes, const std::string& what) {
  if (lost(data, bytes)) throw std::invalid_argument(what + " " + kTruncated);
  // a push that moves the ranges: unwatched first, so that the handler never reads them freed
  if (watched_.size() == watched_.capacity()) region_watch_.clear();
  watched_.push_back({reinterpret_cast<uintptr_t>(data),
                      reinterpret_cast<uintptr_t>(data) + bytes});
  watched_what_.push_back(what);
  region_watch_.watch(watched_);
}

std::string Instance::truncated() const {
  for (size_t i = 0; i < watched_.size(); ++i)
    if (lost(reinterpret_cast<const void*>(watched_[i].begin),
             watched_[i].end - watched_[i].begin))
      return watched_what_[i] + " " + kTruncated;
  return std::string("an input ") + kTruncated;
}

void Instance::run_group(const std::vector<Request*>& group, uint64_t exec_start) {
  Times times;
  times.exec_start = exec_start;
  int64_t total = 0;
  for (const Request* r : group) total += r->batch;
  int64_t samples = total;  // an unbatched model's: its first input's first dimension
  std::string error;
  TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
  bool answering = false;  // outputs made in the responses: no retry from there
  watched_.clear();
  watched_what_.clear();
  watched_.reserve(64);
  try {
    c10::InferenceMode inference;
#ifdef DEPLOYBENCH_CUDA
    std::optional<c10::cuda::CUDAStreamGuard> on_stream;
    if (stream_) on_stream.emplace(*stream_);
#endif
    bool copied = false;
    std::vector<at::Tensor> inputs = engine_->reads_inputs() ? gather(group, total, &copied)
                                                             : placeholders(group, total);
    if (model_.max_batch_size == 0 && !inputs.empty() && inputs[0].dim() > 0)
      samples = inputs[0].size(0);
    if (copied) synchronize();  // the copies count as the execution's compute input
    times.compute_start = now_ns();
    if (model_.precision == "fp16" && engine_->takes_half())
      for (at::Tensor& x : inputs)
        if (x.is_floating_point()) x = x.to(at::kHalf);
    std::vector<at::Tensor> outputs = checked_outputs(engine_->run(inputs), total);
    synchronize();
    engine_->check_run();
    if (region_watch_.faulted()) throw std::invalid_argument(truncated());
    times.compute_end = now_ns();
    answering = true;
    scatter(group, outputs);
    synchronize();  // Triton reads the outputs once the responses are sent
    times.exec_end = now_ns();
  } catch (const c10::Error& e) {
    error = e.what_without_backtrace();
  } catch (const std::invalid_argument& e) {  // the request's (a lost region)
    error = e.what();
    code = TRITONSERVER_ERROR_INVALID_ARG;
  } catch (const std::exception& e) {
    error = e.what();
  }
  region_watch_.clear();
  if (!error.empty() && group.size() > 1 && !answering) {
    // One request's values may fail the whole batch: each is run alone (through the same
    // checks), so that the others' succeed. The batch's error stays in the server log.
    log_error("model '" + model_.name + "' failed a batch of " + std::to_string(group.size()) +
              " requests (" + std::to_string(total) + " samples), each is run alone: " + error);
    for (Request* r : group) run_group({r}, now_ns());
    return;
  }
  // counted before the responses go: a client that reads the metrics or statistics once
  // answered finds its requests there
  if (error.empty()) {
    profile(times, samples);
    if (metrics_) metrics_->update(*engine_->table_counts());
    failed(TRITONBACKEND_ModelInstanceReportBatchStatistics(
        triton_, total, times.exec_start, times.compute_start, times.compute_end,
        times.exec_end));
  } else {
    log_error("model '" + model_.name + "' failed a batch of " + std::to_string(total) + ": " +
              error);
  }
  for (Request* r : group) {
    if (!error.empty()) {
      r->error = "model '" + model_.name + "': " + error;
      r->code = code;
    }
    finish(*r, times);
  }
}

void Instance::finish(Request& r, const Times& t) {
  bool ok = r.error.empty();
  failed(TRITONBACKEND_ModelInstanceReportStatistics(triton_, r.request, ok, t.exec_start,
                                                     t.compute_start, t.compute_end,
                                                     t.exec_end));
  if (r.response != nullptr) {
    // to the client without a traceback or a path of the server's (its log has them)
    TRITONSERVER_Error* error =
        ok ? nullptr : TRITONSERVER_ErrorNew(r.code, client_text(r.error).c_str());
    std::string unsent =
        failed(TRITONBACKEND_ResponseSend(r.response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error));
    if (!unsent.empty()) log_error("model '" + model_.name + "': a response failed: " + unsent);
  } else {
    log_error("model '" + model_.name + "': no response could be made: " + r.error);
  }
  failed(TRITONBACKEND_RequestRelease(r.request, TRITONSERVER_REQUEST_RELEASE_ALL));
}

}  // namespace deploybench
