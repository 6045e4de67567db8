// The deploybench backend: Triton's entry points. It serves the pipeline's converted
// artifacts inside the server's process (PyTorch's with libtorch, ONNX with ONNX Runtime, a
// recommender's embedding lookups), where the python backend runs them in a stub process
// behind shared-memory copies. Errors while loading make the model unavailable
// with the reason; errors while serving become error responses, and the server serves on.
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "instance.h"
#include "model.h"
#include "triton_api.h"

namespace {

using deploybench::Instance;
using deploybench::ModelSpec;

TRITONSERVER_Error* error(TRITONSERVER_Error_Code code, const std::string& text) {
  return TRITONSERVER_ErrorNew(code, ("deploybench backend: " + text).c_str());
}

void log_message(TRITONSERVER_LogLevel level, const std::string& text) {
  TRITONSERVER_Error* e = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, text.c_str());
  if (e != nullptr) TRITONSERVER_ErrorDelete(e);
}

void log_info(const std::string& text) { log_message(TRITONSERVER_LOG_INFO, text); }

// libtorch's warnings go to c10's handler, which prints each one to stderr: a warning
// raised at every call (a TorchScript LSTM's "RNN module weights are not part of single
// contiguous chunk of memory", once an inference) filled 830 MB of one server's log on
// 2026-11-27. This handler logs a warning through Triton's log the first time and then at
// its 10th, 100th, ... time, with the count.
class FoldedWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override {
    const std::string& text = warning.msg();
    uint64_t count = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      count = ++counts_[text];
    }
    uint64_t power = 1;
    while (power < count) power *= 10;
    if (power != count) return;
    std::string times = std::to_string(count) + (count == 1 ? " time" : " times so far");
    log_message(TRITONSERVER_LOG_WARN, "libtorch warning (" + times + "): " + text);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, uint64_t> counts_;
};

FoldedWarnings folded_warnings;

// c10's handler is per thread: set on each thread that runs libtorch for the server.
void fold_warnings() { c10::WarningUtils::set_warning_handler(&folded_warnings); }

#define RETURN_IF_ERROR(call)               \
  do {                                      \
    TRITONSERVER_Error* failure__ = (call); \
    if (failure__ != nullptr) return failure__; \
  } while (false)

// Runs `body`, turning an exception into Triton's error (a model or instance that fails
// to load is unavailable, with this reason in the server's log and load error).
template <typename Body>
TRITONSERVER_Error* guarded(const std::string& what, Body body) {
  try {
    return body();
  } catch (const c10::Error& e) {
    return error(TRITONSERVER_ERROR_INVALID_ARG, what + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return error(TRITONSERVER_ERROR_INVALID_ARG, what + ": " + e.what());
  }
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend*) {
  uint32_t major = 0, minor = 0;
  RETURN_IF_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != TRITONBACKEND_API_MAJOR || minor < TRITONBACKEND_API_MINOR)
    return error(TRITONSERVER_ERROR_UNSUPPORTED,
                 "built for backend API " + std::to_string(TRITONBACKEND_API_MAJOR) + "." +
                     std::to_string(TRITONBACKEND_API_MINOR) + ", the server has " +
                     std::to_string(major) + "." + std::to_string(minor));
  log_info("deploybench backend: libtorch " DEPLOYBENCH_TORCH_VERSION
#ifdef DEPLOYBENCH_CUDA
           ", CUDA"
#else
           ", CPU only"
#endif
#ifdef DEPLOYBENCH_ONNXRUNTIME
           ", onnxruntime " DEPLOYBENCH_ONNXRUNTIME_VERSION
#endif
  );
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  const char* name = "";
  uint64_t version = 0;
  const char* location = nullptr;
  TRITONBACKEND_ArtifactType type;
  TRITONSERVER_Message* config = nullptr;
  RETURN_IF_ERROR(TRITONBACKEND_ModelName(model, &name));
  RETURN_IF_ERROR(TRITONBACKEND_ModelVersion(model, &version));
  RETURN_IF_ERROR(TRITONBACKEND_ModelRepository(model, &type, &location));
  RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, &config));
  const char* json = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* serialised = TRITONSERVER_MessageSerializeToJson(config, &json, &size);
  std::string text = serialised == nullptr ? std::string(json, size) : "";
  TRITONSERVER_MessageDelete(config);
  RETURN_IF_ERROR(serialised);
  return guarded(std::string("model '") + name + "'", [&]() -> TRITONSERVER_Error* {
    auto spec = std::make_unique<ModelSpec>(ModelSpec::from_config(
        text, std::string(location) + "/" + std::to_string(version)));
    RETURN_IF_ERROR(TRITONBACKEND_ModelSetState(model, spec.get()));
    spec.release();
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
  delete static_cast<ModelSpec*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  const char* name = "";
  TRITONSERVER_InstanceGroupKind kind;
  int32_t device_id = 0;
  TRITONBACKEND_Model* model = nullptr;
  void* state = nullptr;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceName(instance, &name));
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceKind(instance, &kind));
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceDeviceId(instance, &device_id));
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
  RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
  const ModelSpec& spec = *static_cast<ModelSpec*>(state);
  fold_warnings();
  return guarded(std::string("instance '") + name + "'", [&]() -> TRITONSERVER_Error* {
    at::Device device = at::kCPU;
    if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU) {
      int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
      if (device_id >= gpus)
        return error(TRITONSERVER_ERROR_UNAVAILABLE,
                     std::string("instance '") + name + "' is on GPU " +
                         std::to_string(device_id) + ", but torch " DEPLOYBENCH_TORCH_VERSION " sees " +
                         std::to_string(gpus) + " GPU(s)");
      device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_id));
    } else if (kind != TRITONSERVER_INSTANCEGROUPKIND_CPU) {
      return error(TRITONSERVER_ERROR_INVALID_ARG,
                   std::string("instance '") + name + "': use KIND_CPU or KIND_GPU");
    }
    auto started = std::chrono::steady_clock::now();
    auto state = std::make_unique<Instance>(instance, spec, device);
    std::string loaded = state->engine().describe();
    RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceSetState(instance, state.get()));
    state.release();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                         .count();
    log_info("deploybench: instance " + std::string(name) + " loaded its " + spec.runner +
             " engine on " + device.str() + " in " + std::to_string(seconds) + " s" +
             (loaded.empty() ? "" : ": " + loaded));
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
  delete static_cast<Instance*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  void* state = nullptr;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
  fold_warnings();  // a thread-local pointer's store
  // Every request is answered and released inside, with an error response where it fails;
  // no exception leaves the backend (execute catches its own; this is the last guard).
  try {
    static_cast<Instance*>(state)->execute(requests, request_count);
  } catch (const std::exception& e) {
    log_message(TRITONSERVER_LOG_ERROR, std::string("deploybench backend: ") + e.what());
  }
  return nullptr;
}

}  // extern "C"
