#include <cstdlib>

#include "unit.h"

namespace deploybench::unit {

// ONNX Runtime's engine over an identity graph of each data type the pipeline serves (made by
// tests/unit/test_cpp_unit.py in DEPLOYBENCH_TEST_ONNX_DIR): every request's rows come back as
// sent, in its type (an INT32 input bound or read back as INT64 fails here, in seconds).
void test_onnxruntime_types() {
  const char* dir = std::getenv("DEPLOYBENCH_TEST_ONNX_DIR");
  if (dir == nullptr) return;
  for (const std::string type : {"FP32", "FP16", "INT32", "INT64", "BOOL"}) {
    ModelSpec spec = spec_of(type, 8, "onnxruntime",
                             R"(, "artifact": {"string_value": "identity_)" + type + R"(.onnx"})",
                             dir);
    Instance instance(nullptr, spec, at::kCPU);
    auto requests = requests_of(type);
    execute(instance, requests);
    for (auto& r : requests) {
      EXPECT(r.response && r.response->error.empty() && r.success);
      if (!r.response || !r.response->error.empty()) {
        std::fprintf(stderr, "onnxruntime %s: %s\n", type.c_str(),
                     r.response ? r.response->error.c_str() : "no response");
        continue;
      }
      const auto* out = r.response->outputs.at(0);
      std::vector<uint8_t> sent;
      for (const auto& b : r.inputs[0].buffers) sent.insert(sent.end(), b.begin(), b.end());
      EXPECT(out->type == triton_of(type) && out->shape == r.inputs[0].shape);
      EXPECT(out->data == sent);
    }
  }
}

}  // namespace deploybench::unit
