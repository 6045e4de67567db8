// ONNX Runtime in the server's process, through its C API (ort_api.h): a session per
// instance on the instance's device (the CPU execution provider with the instance's intra-op
// threads, or the CUDA provider on the instance's GPU and CUDA stream), inputs bound in place
// over the batch the instance gathered (host or GPU memory), outputs bound to the device and
// handed on without a copy. FP32 is strict: the CUDA provider's TF32 is off unless the model
// is FP16. A graph's FP16 inputs (an FP16 export) get the clients' FP32 cast here; an input
// the graph dropped (an exported graph keeps only the inputs the model reads) is not bound.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "engine.h"

#ifdef DEPLOYBENCH_ONNXRUNTIME
#include <dlfcn.h>

#include "ort_api.h"

#ifdef DEPLOYBENCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace deploybench {
namespace {

// The library's entry point, the library opened at first use.
const OrtApiBase& api_base() {
  static const OrtApiBase* base = [] {
    void* library = dlopen(DEPLOYBENCH_ONNXRUNTIME_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr)
      throw std::runtime_error(std::string("cannot load onnxruntime's library: ") + dlerror());
    auto entry = reinterpret_cast<const OrtApiBase* (*)()>(dlsym(library, "OrtGetApiBase"));
    if (entry == nullptr)
      throw std::runtime_error(DEPLOYBENCH_ONNXRUNTIME_LIBRARY " has no OrtGetApiBase");
    return entry();
  }();
  return *base;
}

const OrtApi& api() {
  static const OrtApi* table = [] {
    const OrtApi* got = api_base().GetApi(kOrtApiVersion);
    if (got == nullptr)
      throw std::runtime_error(std::string("onnxruntime ") + api_base().GetVersionString() +
                               " does not serve its C API version " +
                               std::to_string(kOrtApiVersion));
    return got;
  }();
  return *table;
}

// An OrtStatus as an exception naming what failed.
void ort_check(OrtStatus* status, const std::string& what) {
  if (status == nullptr) return;
  std::string text = std::string("onnxruntime: ") + what + ": " + api().GetErrorMessage(status);
  api().ReleaseStatus(status);
  throw std::runtime_error(text);
}

// One environment for the process (ONNX Runtime wants no more), made at first use.
OrtEnv* environment() {
  static OrtEnv* env = [] {
    OrtEnv* made = nullptr;
    ort_check(api().CreateEnv(ORT_LOGGING_LEVEL_WARNING, "deploybench", &made), "CreateEnv");
    return made;
  }();
  return env;
}

template <typename T, void (*OrtApi::*Release)(T*)>
struct Releaser {
  void operator()(T* p) const {
    if (p != nullptr) (api().*Release)(p);
  }
};
using Session = std::unique_ptr<OrtSession, Releaser<OrtSession, &OrtApi::ReleaseSession>>;
using SessionOptions =
    std::unique_ptr<OrtSessionOptions, Releaser<OrtSessionOptions, &OrtApi::ReleaseSessionOptions>>;
using MemoryInfo =
    std::unique_ptr<OrtMemoryInfo, Releaser<OrtMemoryInfo, &OrtApi::ReleaseMemoryInfo>>;
using IoBinding = std::unique_ptr<OrtIoBinding, Releaser<OrtIoBinding, &OrtApi::ReleaseIoBinding>>;
using RunOptions =
    std::unique_ptr<OrtRunOptions, Releaser<OrtRunOptions, &OrtApi::ReleaseRunOptions>>;
using Value = std::unique_ptr<OrtValue, Releaser<OrtValue, &OrtApi::ReleaseValue>>;
using TypeInfo = std::unique_ptr<OrtTypeInfo, Releaser<OrtTypeInfo, &OrtApi::ReleaseTypeInfo>>;
using ShapeInfo = std::unique_ptr<OrtTensorTypeAndShapeInfo,
                                  Releaser<OrtTensorTypeAndShapeInfo,
                                           &OrtApi::ReleaseTensorTypeAndShapeInfo>>;

at::ScalarType aten_of(ONNXTensorElementDataType type, const std::string& name) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return at::kFloat;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return at::kHalf;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return at::kBFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return at::kDouble;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return at::kLong;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return at::kInt;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return at::kShort;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return at::kChar;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return at::kByte;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return at::kBool;
    default:
      throw std::runtime_error("the ONNX graph's tensor '" + name + "' has element type " +
                               std::to_string(type) + ", which this backend does not serve");
  }
}

ONNXTensorElementDataType onnx_of(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    case at::kHalf: return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    case at::kBFloat16: return ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
    case at::kDouble: return ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
    case at::kLong: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
    case at::kInt: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
    case at::kShort: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16;
    case at::kChar: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
    case at::kByte: return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
    case at::kBool: return ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL;
    default: return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  }
}

constexpr const char* kInstanceStream = "the instance's CUDA stream";

class OnnxRuntime : public Engine {
 public:
  explicit OnnxRuntime(const EngineSpec& spec) : device_(spec.device) {
    const OrtApi& ort = api();
    OrtEnv* env = environment();  // first: the CUDA provider's options log through it
    OrtSessionOptions* made = nullptr;
    ort_check(ort.CreateSessionOptions(&made), "CreateSessionOptions");
    SessionOptions options(made);
    ort_check(ort.SetSessionGraphOptimizationLevel(options.get(), ORT_ENABLE_ALL),
              "graph optimisation level");
    ort_check(ort.SetSessionExecutionMode(options.get(), ORT_SEQUENTIAL), "execution mode");
    ort_check(ort.SetInterOpNumThreads(options.get(), 1), "inter-op threads");
    ort_check(ort.SetIntraOpNumThreads(options.get(), device_.is_cuda() ? 1 : spec.threads),
              "intra-op threads");
    if (device_.is_cuda()) {
      stream_note_ = append_cuda(ort, options.get(), spec);
      // No waits of ONNX Runtime's own only in a CUDA graph's capture (run())
      unsynchronised_ = stream_note_ == kInstanceStream && spec.parameters.count("cuda_graphs");
    }
    if (unsynchronised_) {  // the instance's stream orders the captured work instead
      OrtRunOptions* run_options = nullptr;
      ort_check(ort.CreateRunOptions(&run_options), "CreateRunOptions");
      run_options_.reset(run_options);
      ort_check(ort.AddRunConfigEntry(run_options, "disable_synchronize_execution_providers", "1"),
                "run options");
    }
    OrtSession* session = nullptr;
    ort_check(ort.CreateSession(env, spec.path.c_str(), options.get(), &session),
              "loading " + spec.path);
    session_.reset(session);
    OrtMemoryInfo* memory = nullptr;
    if (device_.is_cuda())
      ort_check(ort.CreateMemoryInfo("Cuda", OrtDeviceAllocator, device_.index(), OrtMemTypeDefault,
                                     &memory),
                "CUDA memory info");
    else
      ort_check(ort.CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &memory),
                "CPU memory info");
    memory_.reset(memory);
    read_signature(spec);
  }

  bool takes_half() const override { return false; }  // cast to the graph's own types
  // CUDA graphs capture the current stream: the instance's, which ONNX Runtime must run on
  // without waits of its own
  bool capturable() const { return unsynchronised_; }
  std::string describe() const override {
    return std::string("onnxruntime ") + api_base().GetVersionString() + ", " +
           (device_.is_cuda() ? "CUDA execution provider on " + stream_note_ + ", "
                              : std::string("CPU execution provider, ")) +
           std::to_string(bound_.size()) + " of the config's inputs bound";
  }

  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    const OrtApi& ort = api();
    OrtIoBinding* made = nullptr;
    ort_check(ort.CreateIoBinding(session_.get(), &made), "CreateIoBinding");
    IoBinding binding(made);
    std::vector<Value> values;
    std::vector<at::Tensor> kept;  // cast inputs live until the run ends
    for (const Bound& b : bound_) {
      at::Tensor x = inputs.at(b.input);
      if (x.scalar_type() != b.type) x = x.to(b.type);
      x = x.contiguous();
      if (x.device() != device_) x = x.to(device_);
      kept.push_back(x);
      std::vector<int64_t> shape = x.sizes().vec();
      OrtValue* value = nullptr;
      ort_check(ort.CreateTensorWithDataAsOrtValue(memory_.get(), x.data_ptr(), x.nbytes(),
                                                   shape.data(), shape.size(), onnx_of(b.type),
                                                   &value),
                "input '" + b.name + "'");
      values.emplace_back(value);
      ort_check(ort.BindInput(binding.get(), b.name.c_str(), value), "binding " + b.name);
    }
    for (const std::string& name : outputs_)
      ort_check(ort.BindOutputToDevice(binding.get(), name.c_str(), memory_.get()),
                "binding output " + name);
    // Without waits only inside a CUDA graph's capture (which refuses one): a plain run
    // waits, graphs or not, as it did when ONNX Runtime, given the stream's pointer without
    // its flag, ran on a stream of its own (an H100, 2026-12-07: captures empty, BERT's
    // unsynchronised outputs 1.28 off)
    bool capturing = false;
#ifdef DEPLOYBENCH_CUDA
    if (device_.is_cuda()) {
      c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device_.index());
      capturing = unsynchronised_ && stream_capturing();
      // the inputs' casts and copies were queued on the instance's stream: done before
      // ONNX Runtime reads them (in a capture, on that stream, they come first anyway)
      if (!capturing) stream.synchronize();
    }
#endif
    // ONNX Runtime synchronises its stream at the run's end, except in a capture
    ort_check(ort.RunWithBinding(session_.get(), capturing ? run_options_.get() : nullptr,
                                 binding.get()),
              "run");
    OrtAllocator* allocator = nullptr;
    ort_check(ort.GetAllocatorWithDefaultOptions(&allocator), "allocator");
    OrtValue** produced = nullptr;
    size_t count = 0;
    ort_check(ort.GetBoundOutputValues(binding.get(), allocator, &produced, &count), "outputs");
    std::vector<Value> owned;
    for (size_t i = 0; i < count; ++i) owned.emplace_back(produced[i]);
    ort_check(ort.AllocatorFree(allocator, produced), "freeing the outputs' list");
    std::vector<at::Tensor> out;
    for (Value& value : owned) out.push_back(tensor_of(std::move(value)));
    return out;
  }

 private:
  struct Bound {
    std::string name;
    size_t input;  // its place among the config's inputs
    at::ScalarType type;
  };

  // The CUDA provider on the instance's GPU and, where this onnxruntime takes it, its
  // stream; returns which stream it runs on, for the log.
  static std::string append_cuda(const OrtApi& ort, OrtSessionOptions* options,
                                 const EngineSpec& spec) {
    OrtCUDAProviderOptionsV2* cuda = nullptr;
    ort_check(ort.CreateCUDAProviderOptions(&cuda), "CUDA provider options");
    std::unique_ptr<OrtCUDAProviderOptionsV2, void (*)(OrtCUDAProviderOptionsV2*)> guard(
        cuda, [](OrtCUDAProviderOptionsV2* p) { api().ReleaseCUDAProviderOptions(p); });
    // one call with every option: each call sets the options it is given and resets the
    // others to their defaults (a second call once left TF32 on, 2026-11-28)
    auto update = [&](bool with_stream) {
      std::map<std::string, std::string> settings{
          {"device_id", std::to_string(spec.device.index())},
          {"use_tf32", spec.fp16 ? "1" : "0"}};  // FP32 means FP32
      // the pointer is copied into the options only where the flag is given with it: alone,
      // the options keep a null stream and the provider runs on its own (an H100, 2026-12-07:
      // every capture of it came out empty)
      if (with_stream) {
        settings["has_user_compute_stream"] = "1";
        settings["user_compute_stream"] = std::to_string(reinterpret_cast<uintptr_t>(spec.stream));
      }
      std::vector<const char*> keys, values;
      for (const auto& [k, v] : settings) {
        keys.push_back(k.c_str());
        values.push_back(v.c_str());
      }
      return ort.UpdateCUDAProviderOptions(cuda, keys.data(), values.data(), keys.size());
    };
    std::string note = kInstanceStream;
    OrtStatus* refused = spec.stream != nullptr ? update(true) : nullptr;
    std::string dropped =
        refused == nullptr && spec.stream != nullptr ? stream_dropped(cuda, spec) : "";
    if (spec.stream == nullptr || refused != nullptr || !dropped.empty()) {
      note = "its own CUDA stream";
      if (refused != nullptr) {
        note += std::string(" (it refused the instance's: ") + ort.GetErrorMessage(refused) + ")";
        ort.ReleaseStatus(refused);
      }
      if (!dropped.empty()) note += " (its options dropped the instance's: " + dropped + ")";
      ort_check(update(false), "CUDA provider options");
    }
    ort_check(ort.SessionOptionsAppendExecutionProvider_CUDA_V2(options, cuda),
              "the CUDA execution provider (onnxruntime-gpu and its CUDA libraries)");
    return note;
  }

  // What the provider's options, read back, hold instead of the instance's stream (its flag
  // and pointer, for the log); "" where they hold it.
  static std::string stream_dropped(const OrtCUDAProviderOptionsV2* cuda, const EngineSpec& spec) {
    const OrtApi& ort = api();
    OrtAllocator* allocator = nullptr;
    ort_check(ort.GetAllocatorWithDefaultOptions(&allocator), "allocator");
    char* text = nullptr;
    ort_check(ort.GetCUDAProviderOptionsAsString(cuda, allocator, &text), "reading the options");
    std::string options = text;
    ort_check(ort.AllocatorFree(allocator, text), "freeing the options' text");
    auto value = [&](const std::string& key) {  // "key=value;" pairs
      size_t at = (";" + options).find(";" + key + "=");
      if (at == std::string::npos) return std::string("none");
      size_t start = at + key.size() + 1, end = options.find(';', start);
      return options.substr(start, end == std::string::npos ? std::string::npos : end - start);
    };
    std::string flag = value("has_user_compute_stream"), pointer = value("user_compute_stream");
    if (flag == "1" && pointer == std::to_string(reinterpret_cast<uintptr_t>(spec.stream)))
      return "";
    return "has_user_compute_stream=" + flag + ", user_compute_stream=" + pointer;
  }

  // The graph's inputs among the config's (by name), their element types; its outputs.
  void read_signature(const EngineSpec& spec) {
    const OrtApi& ort = api();
    OrtAllocator* allocator = nullptr;
    ort_check(ort.GetAllocatorWithDefaultOptions(&allocator), "allocator");
    size_t count = 0;
    ort_check(ort.SessionGetInputCount(session_.get(), &count), "input count");
    for (size_t i = 0; i < count; ++i) {
      std::string name = owned_name(allocator, ort.SessionGetInputName, i);
      size_t at = 0;
      while (at < spec.inputs.size() && spec.inputs[at].name != name) ++at;
      if (at == spec.inputs.size())
        throw std::runtime_error("the ONNX graph takes an input '" + name +
                                 "' that the model's config does not declare");
      OrtTypeInfo* info = nullptr;
      ort_check(ort.SessionGetInputTypeInfo(session_.get(), i, &info), "input type");
      TypeInfo type_info(info);
      const OrtTensorTypeAndShapeInfo* tensor = nullptr;
      ort_check(ort.CastTypeInfoToTensorInfo(info, &tensor), "input type");
      ONNXTensorElementDataType element{};
      ort_check(ort.GetTensorElementType(tensor, &element), "input type");
      bound_.push_back({name, at, aten_of(element, name)});
    }
    ort_check(ort.SessionGetOutputCount(session_.get(), &count), "output count");
    std::vector<std::string> graph_outputs;
    for (size_t i = 0; i < count; ++i)
      graph_outputs.push_back(owned_name(allocator, ort.SessionGetOutputName, i));
    for (const TensorSpec& output : spec.outputs) {  // bound in the config's order
      if (std::find(graph_outputs.begin(), graph_outputs.end(), output.name) ==
          graph_outputs.end())
        throw std::runtime_error("the model's config declares an output '" + output.name +
                                 "' that the ONNX graph does not have");
      outputs_.push_back(output.name);
    }
  }

  std::string owned_name(OrtAllocator* allocator,
                         OrtStatus* (*get)(const OrtSession*, size_t, OrtAllocator*, char**),
                         size_t index) {
    char* name = nullptr;
    ort_check(get(session_.get(), index, allocator, &name), "a tensor's name");
    std::string copy(name);
    ort_check(api().AllocatorFree(allocator, name), "freeing a name");
    return copy;
  }

  // An output as a tensor over ONNX Runtime's memory, which it keeps until the tensor goes.
  at::Tensor tensor_of(Value value) {
    const OrtApi& ort = api();
    OrtTensorTypeAndShapeInfo* info = nullptr;
    ort_check(ort.GetTensorTypeAndShape(value.get(), &info), "output shape");
    ShapeInfo shape_info(info);
    size_t dims = 0;
    ort_check(ort.GetDimensionsCount(info, &dims), "output shape");
    std::vector<int64_t> shape(dims);
    ort_check(ort.GetDimensions(info, shape.data(), dims), "output shape");
    ONNXTensorElementDataType element{};
    ort_check(ort.GetTensorElementType(info, &element), "output type");
    void* data = nullptr;
    ort_check(ort.GetTensorMutableData(value.get(), &data), "output data");
    OrtValue* raw = value.release();
    return at::from_blob(
        data, shape, [raw](void*) { api().ReleaseValue(raw); },
        at::TensorOptions().dtype(aten_of(element, "output")).device(device_));
  }

  at::Device device_;
  std::string stream_note_;
  bool unsynchronised_ = false;  // on the instance's stream, no waits in a graph's capture
  RunOptions run_options_;
  Session session_;
  MemoryInfo memory_;
  std::vector<Bound> bound_;
  std::vector<std::string> outputs_;
};

}  // namespace

// The config's `cuda_graphs` (the largest batch to capture; none: 0), checked.
static int64_t graph_batch(const EngineSpec& spec) {
  auto found = spec.parameters.find("cuda_graphs");
  if (found == spec.parameters.end()) return 0;
  const std::string& text = found->second;
  size_t used = 0;
  int64_t batch = 0;
  try {
    batch = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || batch < 1)
    throw std::runtime_error("parameter cuda_graphs '" + text +
                             "' is not a batch size (the largest batch to capture, 1 or more)");
  if (!spec.device.is_cuda())
    throw std::runtime_error("parameter cuda_graphs " + text +
                             ": CUDA graphs need a GPU instance, and this one is on the CPU");
  return batch;
}

std::unique_ptr<Engine> load_onnxruntime(const EngineSpec& spec) {
  int64_t graphs = graph_batch(spec);
  auto engine = std::make_unique<OnnxRuntime>(spec);
  if (graphs == 0) return engine;
  if (!engine->capturable())
    throw std::runtime_error("parameter cuda_graphs " + std::to_string(graphs) +
                             ": ONNX Runtime did not take the instance's CUDA stream, which a "
                             "CUDA graph captures (" + engine->describe() + ")");
  // asked by the reference's setting, not by the runner's name: kept where they pay
  return with_cuda_graphs(std::move(engine), graphs, /*where_faster=*/true);
}

}  // namespace deploybench

#else  // built without onnxruntime

namespace deploybench {
std::unique_ptr<Engine> load_onnxruntime(const EngineSpec&) {
  throw std::runtime_error(
      "runner onnxruntime: this backend was built without onnxruntime (its wheel was not "
      "installed where the backend was built); the python backend serves ONNX");
}
}  // namespace deploybench

#endif
