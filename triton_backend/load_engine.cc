// Which engine serves a model: the one place that knows every engine, so that the engines
// (torch's in engine.cc, ONNX Runtime's, the embedding store) depend on the interface alone
// and none on another.
#include <stdexcept>
#include <string>

#include "engine.h"

namespace deploybench {

std::unique_ptr<Engine> load_engine(const EngineSpec& spec) {
  if (!known_runner(spec.runner)) throw std::runtime_error("unknown runner '" + spec.runner + "'");
  if (spec.runner == "identity") return load_torch(spec);
  std::string refused = precision_refusal(spec.precision, spec.device);
  if (!refused.empty()) throw std::runtime_error(refused);
  if (spec.runner == "onnxruntime") return load_onnxruntime(spec);
  if (spec.runner == "embeddings") return load_embeddings(spec);
  return load_torch(spec);
}

}  // namespace deploybench
