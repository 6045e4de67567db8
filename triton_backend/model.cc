#include "model.h"

#include <cstdlib>
#include <map>
#include <stdexcept>

#include "json.h"
#include "util.h"

namespace deploybench {
namespace {

const std::map<std::string, TRITONSERVER_DataType>& config_types() {
  static const std::map<std::string, TRITONSERVER_DataType> types{
      {"TYPE_BOOL", TRITONSERVER_TYPE_BOOL},   {"TYPE_UINT8", TRITONSERVER_TYPE_UINT8},
      {"TYPE_INT8", TRITONSERVER_TYPE_INT8},   {"TYPE_INT16", TRITONSERVER_TYPE_INT16},
      {"TYPE_INT32", TRITONSERVER_TYPE_INT32}, {"TYPE_INT64", TRITONSERVER_TYPE_INT64},
      {"TYPE_FP16", TRITONSERVER_TYPE_FP16},   {"TYPE_FP32", TRITONSERVER_TYPE_FP32},
      {"TYPE_FP64", TRITONSERVER_TYPE_FP64},   {"TYPE_BF16", TRITONSERVER_TYPE_BF16}};
  return types;
}

std::vector<TensorSpec> tensors(const Json& list, const char* what) {
  std::vector<TensorSpec> out;
  for (const Json& t : list.items) {
    TensorSpec spec{t["name"].string(), aten_type(t["data_type"].string(), t["name"].string()),
                    {}};
    for (const Json& d : t["dims"].items) spec.dims.push_back(d.integer());
    if (t["reshape"].kind == Json::kObject)
      throw std::runtime_error(std::string(what) + " '" + spec.name +
                               "' has a reshape, which this backend does not apply");
    out.push_back(std::move(spec));
  }
  return out;
}

std::string parameter(const Json& config, const std::string& key, const std::string& fallback) {
  const Json& value = config["parameters"][key]["string_value"];
  return value.kind == Json::kString && !value.text.empty() ? value.text : fallback;
}

}  // namespace

at::ScalarType aten_type(TRITONSERVER_DataType type, const std::string& tensor) {
  switch (type) {
    case TRITONSERVER_TYPE_BOOL: return at::kBool;
    case TRITONSERVER_TYPE_UINT8: return at::kByte;
    case TRITONSERVER_TYPE_INT8: return at::kChar;
    case TRITONSERVER_TYPE_INT16: return at::kShort;
    case TRITONSERVER_TYPE_INT32: return at::kInt;
    case TRITONSERVER_TYPE_INT64: return at::kLong;
    case TRITONSERVER_TYPE_FP16: return at::kHalf;
    case TRITONSERVER_TYPE_FP32: return at::kFloat;
    case TRITONSERVER_TYPE_FP64: return at::kDouble;
    case TRITONSERVER_TYPE_BF16: return at::kBFloat16;
    default:
      throw std::runtime_error("tensor '" + tensor + "' has data type " + type_name(type) +
                               ", which this backend cannot serve (valid: BOOL, UINT8, INT8, "
                               "INT16, INT32, INT64, FP16, FP32, FP64, BF16)");
  }
}

at::ScalarType aten_type(const std::string& config_type, const std::string& tensor) {
  auto found = config_types().find(config_type);
  return aten_type(found == config_types().end() ? TRITONSERVER_TYPE_INVALID : found->second,
                   tensor);
}

TRITONSERVER_DataType triton_type(at::ScalarType type) {
  for (const auto& [name, triton] : config_types())
    if (aten_type(triton, name) == type) return triton;
  return TRITONSERVER_TYPE_INVALID;
}

const char* type_name(TRITONSERVER_DataType type) {
  for (const auto& [name, triton] : config_types())
    if (triton == type) return name.c_str() + 5;  // without "TYPE_"
  return type == TRITONSERVER_TYPE_BYTES ? "BYTES" : "INVALID";
}

ModelSpec ModelSpec::from_config(const std::string& text, const std::string& directory) {
  Json config = Json::parse(text);
  ModelSpec spec;
  spec.name = config["name"].string();
  spec.directory = directory;
  spec.max_batch_size = config["max_batch_size"].integer();
  spec.inputs = tensors(config["input"], "input");
  spec.outputs = tensors(config["output"], "output");
  for (const auto& [key, value] : config["parameters"].members)
    spec.parameters[key] = value["string_value"].string();
  spec.runner = parameter(config, "runner", "");
  if (!known_runner(spec.runner))
    throw std::runtime_error("parameter runner '" + spec.runner +
                             "' is not one this backend serves (valid: torch, torch-cudagraph, "
                             "aoti, aoti-cudagraph, onnxruntime, embeddings, identity)");
  spec.precision = parameter(config, "precision", "fp32");
  if (!known_precision(spec.precision))
    throw std::runtime_error("parameter precision '" + spec.precision +
                             "' is not valid (valid: fp32, fp16, int8, int8-weight-only, fp8)");
  spec.artifact = parameter(config, "artifact", config["default_model_filename"].string());
  if (spec.artifact.empty() && spec.runner != "identity")
    throw std::runtime_error("no artifact: set parameter artifact or default_model_filename");
  // CPU instances share the cores evenly, as the python backend's runners do
  int64_t cpu_instances = 0;
  for (const Json& group : config["instance_group"].items)
    if (group["kind"].string() == "KIND_CPU") cpu_instances += group["count"].integer();
  std::string threads = parameter(config, "threads", "0");
  char* end = nullptr;
  spec.cpu_threads = static_cast<int>(std::strtol(threads.c_str(), &end, 10));
  if (*end || spec.cpu_threads < 0)
    throw std::runtime_error("parameter threads '" + threads +
                             "' is not valid (a whole number of CPU threads; 0: the cores "
                             "shared evenly among the CPU instances)");
  if (spec.cpu_threads <= 0) {
    int cores = usable_cores();
    spec.cpu_threads = std::max<int64_t>(1, cores / std::max<int64_t>(1, cpu_instances));
  }
  return spec;
}

EngineSpec ModelSpec::engine(at::Device device) const {
  EngineSpec engine;
  engine.runner = runner;
  engine.path = directory + "/" + artifact;
  engine.precision = precision;
  engine.fp16 = precision == "fp16";
  engine.device = device;
  engine.threads = cpu_threads;
  engine.max_batch_size = max_batch_size;
  engine.inputs = inputs;
  engine.outputs = outputs;
  engine.parameters = parameters;
  return engine;
}

}  // namespace deploybench
