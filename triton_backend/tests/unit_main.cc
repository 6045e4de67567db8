// The C++ unit tests' program: the harness (unit.h) and main(), which runs every file's
// tests and ends with the count of failures that tests/unit/test_cpp_unit.py reads.
#include <c10/core/InferenceMode.h>

#include <stdexcept>

#include "unit.h"

namespace deploybench::unit {

int failures = 0;

void check_throws(const std::function<void()>& body, const std::vector<std::string>& words,
                  const char* what) {
  try {
    body();
  } catch (const std::exception& e) {
    for (const auto& w : words)
      if (std::string(e.what()).find(w) == std::string::npos) {
        std::fprintf(stderr, "%s: the error '%s' does not say '%s'\n", what, e.what(), w.c_str());
        ++failures;
      }
    return;
  }
  std::fprintf(stderr, "%s: nothing was thrown\n", what);
  ++failures;
}

const std::vector<std::string> kTypes{"BOOL", "UINT8", "INT8", "INT16", "INT32",
                                      "INT64", "FP16", "FP32", "FP64", "BF16"};

TRITONSERVER_DataType triton_of(const std::string& name) {
  return triton_type(aten_type("TYPE_" + name, "t"));
}

ModelSpec spec_of(const std::string& type, int64_t max_batch, const std::string& runner,
                  const std::string& extra_parameters, const std::string& directory) {
  std::string json = R"({"name": "m", "max_batch_size": )" + std::to_string(max_batch) +
                     R"(, "input": [{"name": "x", "data_type": "TYPE_)" + type +
                     R"(", "dims": ["3"]}], "output": [{"name": "y", "data_type": "TYPE_)" +
                     type + R"(", "dims": ["3"]}], "parameters": {"runner": {"string_value": ")" +
                     runner + "\"}" + extra_parameters + "}}";
  return ModelSpec::from_config(json, directory);
}

std::vector<TRITONBACKEND_Request> requests_of(const std::string& type) {
  std::vector<TRITONBACKEND_Request> requests(3);
  int64_t base = 0;
  for (int64_t i = 0; i < 3; ++i) {
    int64_t batch = i + 1;
    at::Tensor values = at::arange(base, base + batch * 3, at::kLong).remainder(97);
    if (type == "BOOL") values = values.remainder(2);
    values = values.to(aten_type("TYPE_" + type, "x")).contiguous();
    std::vector<uint8_t> bytes(static_cast<uint8_t*>(values.data_ptr()),
                               static_cast<uint8_t*>(values.data_ptr()) + values.nbytes());
    requests[i].inputs.push_back(
        fake::input("x", triton_of(type), {batch, 3}, bytes, i == 1 ? 2 : 1));
    requests[i].outputs = {"y"};
    base += batch * 3 + 5;
  }
  return requests;
}

void execute(Instance& instance, std::vector<TRITONBACKEND_Request>& requests) {
  std::vector<TRITONBACKEND_Request*> pointers;
  for (auto& r : requests) pointers.push_back(&r);
  instance.execute(pointers.data(), static_cast<uint32_t>(pointers.size()));
}

}  // namespace deploybench::unit

using namespace deploybench::unit;

int main() {
  c10::InferenceMode inference;
  test_types();
  for (const auto& type : kTypes) test_gather_scatter(type);
  test_wrong_requests_fail_alone();
  test_a_bad_value_fails_only_its_request();
  test_onnxruntime_types();
  test_embeddings_equal_a_plain_gather();
  test_the_cache_refreshes();
  test_embedding_metrics();
  test_npy_refusals();
  test_strict_convolutions();
  test_host_copies();
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
