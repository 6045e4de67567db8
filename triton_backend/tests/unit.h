// The C++ unit tests' harness, shared by their files (one program, deploybench_unit_tests,
// run by tests/unit/test_cpp_unit.py): EXPECT counts a failure and goes on, so that one run lists
// every failure; requests over the fake server's API (fake_triton.h); and each file's tests,
// which main() (unit_main.cc) runs in order.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../instance.h"
#include "../model.h"
#include "fake_triton.h"

namespace deploybench::unit {

extern int failures;
#define EXPECT(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      ++::deploybench::unit::failures;                                        \
    }                                                                         \
  } while (false)

// Runs `body`, which must throw an exception whose text contains every one of `words`.
void check_throws(const std::function<void()>& body, const std::vector<std::string>& words,
                  const char* what);

// Every data type the backend serves, by Triton's name.
extern const std::vector<std::string> kTypes;
TRITONSERVER_DataType triton_of(const std::string& name);
// A model of one input x and one output y of [3] of `type`, served by `runner`.
ModelSpec spec_of(const std::string& type, int64_t max_batch, const std::string& runner,
                  const std::string& extra_parameters = "",
                  const std::string& directory = "/nowhere");

// Its input back, as a new tensor: what the batch held, row by row.
class Echo : public Engine {
 public:
  bool takes_half() const override { return false; }
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    return {inputs.at(0).clone()};
  }
};

// Requests of batch 1, 2 (its input in two buffers) and 3 of distinct values of `type`.
std::vector<TRITONBACKEND_Request> requests_of(const std::string& type);
void execute(Instance& instance, std::vector<TRITONBACKEND_Request>& requests);

// types_test.cc
void test_types();
// batch_test.cc
void test_gather_scatter(const std::string& type);
void test_wrong_requests_fail_alone();
void test_a_bad_value_fails_only_its_request();
// onnxruntime_test.cc
void test_onnxruntime_types();
// embeddings_test.cc
void test_embeddings_equal_a_plain_gather();
void test_the_cache_refreshes();
void test_embedding_metrics();
void test_npy_refusals();
// torchscript_test.cc
void test_strict_convolutions();
// host_copy_test.cc
void test_host_copies();

}  // namespace deploybench::unit
