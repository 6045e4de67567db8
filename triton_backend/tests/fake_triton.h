// A fake of the server's side of Triton's API, as much as the backend's core calls: requests
// whose inputs lie in host buffers the test fills (an input may come in several buffers),
// responses that keep what the backend writes, statistics and metrics recorded. What a test
// of gather, scatter, statistics and metrics needs, without a server.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../triton_api.h"

struct TRITONBACKEND_Input {
  std::string name;
  TRITONSERVER_DataType type;
  std::vector<int64_t> shape;
  std::vector<std::vector<uint8_t>> buffers;
};

struct TRITONBACKEND_Output {
  std::string name;
  TRITONSERVER_DataType type;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

struct TRITONBACKEND_Response {
  std::vector<TRITONBACKEND_Output*> outputs;
  bool sent = false;
  std::string error;  // empty: a success
  ~TRITONBACKEND_Response() {
    for (auto* o : outputs) delete o;
  }
};

struct TRITONBACKEND_Request {
  std::vector<TRITONBACKEND_Input> inputs;
  std::vector<std::string> outputs;  // the outputs the client asks for
  TRITONBACKEND_Response* response = nullptr;
  bool released = false;
  // what ReportStatistics recorded for it
  bool reported = false, success = false;
  uint64_t times[4] = {0, 0, 0, 0};
  ~TRITONBACKEND_Request() { delete response; }
};

struct TRITONSERVER_Metric {
  std::map<std::string, std::string> labels;
  std::string family;
  double value = 0;
};

namespace fake {

struct BatchReport {
  uint64_t batch;
  uint64_t times[4];
};
extern std::vector<BatchReport> batches;  // ReportBatchStatistics, in order
extern std::vector<TRITONSERVER_Metric*> metrics;  // every metric made, never freed
extern std::vector<std::string> log;               // LogMessage's texts

// An input of `values` (their bytes), in `pieces` buffers of about equal size.
template <typename T>
TRITONBACKEND_Input input(const std::string& name, TRITONSERVER_DataType type,
                          std::vector<int64_t> shape, const std::vector<T>& values,
                          int pieces = 1) {
  TRITONBACKEND_Input in{name, type, std::move(shape), {}};
  const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
  size_t total = values.size() * sizeof(T), step = (total + pieces - 1) / pieces;
  for (size_t at = 0; at < total || in.buffers.empty(); at += step)
    in.buffers.emplace_back(bytes + at, bytes + std::min(total, at + step));
  return in;
}

double metric(const std::string& family, const std::string& table);

}  // namespace fake
