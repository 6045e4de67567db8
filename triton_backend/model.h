// What a model's config.pbtxt says, as this backend reads it (from the JSON Triton hands
// over): its tensors, batching and the pipeline's parameters (runner, precision, threads).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "engine.h"
#include "triton_api.h"

namespace deploybench {

struct ModelSpec {
  std::string name;
  std::string directory;  // <repository>/<model>/<version>
  int64_t max_batch_size = 0;
  std::vector<TensorSpec> inputs, outputs;
  std::string runner, precision, artifact;
  std::map<std::string, std::string> parameters;  // every parameter's string value
  int cpu_threads = 0;  // intra-op threads of a CPU instance

  // Reads and checks a config; throws naming what is wrong and what would be valid.
  static ModelSpec from_config(const std::string& json, const std::string& directory);
  EngineSpec engine(at::Device device) const;
};

// Triton's data types as ATen's; throws for one this backend cannot serve (BYTES).
at::ScalarType aten_type(TRITONSERVER_DataType type, const std::string& tensor);
at::ScalarType aten_type(const std::string& config_type, const std::string& tensor);
TRITONSERVER_DataType triton_type(at::ScalarType type);
const char* type_name(TRITONSERVER_DataType type);

}  // namespace deploybench
