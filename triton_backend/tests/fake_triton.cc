#include "fake_triton.h"

#include <algorithm>
#include <cstring>

struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code;
  std::string message;
};
struct TRITONSERVER_Parameter {
  std::string name, value;
};
struct TRITONSERVER_MetricFamily {
  std::string name;
};

namespace fake {
std::vector<BatchReport> batches;
std::vector<TRITONSERVER_Metric*> metrics;
std::vector<std::string> log;

double metric(const std::string& family, const std::string& table) {
  double total = 0;
  for (auto* m : metrics)
    if (m->family == family && m->labels["table"] == table) total += m->value;
  return total;
}
}  // namespace fake

namespace {
TRITONSERVER_Error* error(const std::string& text) {
  return new TRITONSERVER_Error{TRITONSERVER_ERROR_INVALID_ARG, text};
}
}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg) {
  return new TRITONSERVER_Error{code, msg};
}
void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* e) { delete e; }
const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* e) { return e->message.c_str(); }
TRITONSERVER_Error* TRITONSERVER_LogMessage(TRITONSERVER_LogLevel, const char*, const int,
                                            const char* msg) {
  fake::log.emplace_back(msg);
  return nullptr;
}

TRITONSERVER_Parameter* TRITONSERVER_ParameterNew(const char* name, const TRITONSERVER_ParameterType,
                                                  const void* value) {
  return new TRITONSERVER_Parameter{name, static_cast<const char*>(value)};
}
void TRITONSERVER_ParameterDelete(TRITONSERVER_Parameter* p) { delete p; }
TRITONSERVER_Error* TRITONSERVER_MetricFamilyNew(TRITONSERVER_MetricFamily** family,
                                                 const TRITONSERVER_MetricKind, const char* name,
                                                 const char*) {
  *family = new TRITONSERVER_MetricFamily{name};
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_MetricFamilyDelete(TRITONSERVER_MetricFamily* f) {
  delete f;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_MetricNew(TRITONSERVER_Metric** metric,
                                           TRITONSERVER_MetricFamily* family,
                                           const TRITONSERVER_Parameter** labels,
                                           const uint64_t count) {
  auto* m = new TRITONSERVER_Metric{{}, family->name, 0};
  for (uint64_t i = 0; i < count; ++i) m->labels[labels[i]->name] = labels[i]->value;
  fake::metrics.push_back(m);
  *metric = m;
  return nullptr;
}
TRITONSERVER_Error* TRITONSERVER_MetricDelete(TRITONSERVER_Metric*) { return nullptr; }
TRITONSERVER_Error* TRITONSERVER_MetricIncrement(TRITONSERVER_Metric* metric, double value) {
  metric->value += value;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestInput(TRITONBACKEND_Request* request, const char* name,
                                               TRITONBACKEND_Input** input) {
  for (auto& in : request->inputs)
    if (in.name == name) {
      *input = &in;
      return nullptr;
    }
  return error(std::string("no input '") + name + "' in the request");
}

TRITONSERVER_Error* TRITONBACKEND_InputProperties(TRITONBACKEND_Input* input, const char** name,
                                                  TRITONSERVER_DataType* type,
                                                  const int64_t** shape, uint32_t* dims,
                                                  uint64_t* bytes, uint32_t* buffers) {
  if (name) *name = input->name.c_str();
  if (type) *type = input->type;
  if (shape) *shape = input->shape.data();
  if (dims) *dims = static_cast<uint32_t>(input->shape.size());
  if (bytes) {
    *bytes = 0;
    for (const auto& b : input->buffers) *bytes += b.size();
  }
  if (buffers) *buffers = static_cast<uint32_t>(input->buffers.size());
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_InputBuffer(TRITONBACKEND_Input* input, const uint32_t index,
                                              const void** buffer, uint64_t* size,
                                              TRITONSERVER_MemoryType* type, int64_t* id) {
  if (index >= input->buffers.size()) return error("no such buffer");
  *buffer = input->buffers[index].data();
  *size = input->buffers[index].size();
  *type = TRITONSERVER_MEMORY_CPU;
  *id = 0;
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request* request,
                                                     uint32_t* count) {
  *count = static_cast<uint32_t>(request->outputs.size());
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request* request,
                                                    const uint32_t index, const char** name) {
  *name = request->outputs.at(index).c_str();
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request, uint32_t) {
  if (request->released) return error("released twice");
  request->released = true;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ResponseNew(TRITONBACKEND_Response** response,
                                              TRITONBACKEND_Request* request) {
  if (request->response) return error("a second response");
  request->response = *response = new TRITONBACKEND_Response;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response* response,
                                                 TRITONBACKEND_Output** output, const char* name,
                                                 const TRITONSERVER_DataType type,
                                                 const int64_t* shape, const uint32_t dims) {
  auto* out = new TRITONBACKEND_Output{name, type, {shape, shape + dims}, {}};
  response->outputs.push_back(out);
  *output = out;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output* output, void** buffer,
                                               const uint64_t size, TRITONSERVER_MemoryType* type,
                                               int64_t* id) {
  output->data.assign(size, 0xAB);  // poison: every byte must be written
  *buffer = output->data.data();
  *type = TRITONSERVER_MEMORY_CPU;
  *id = 0;
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ResponseSend(TRITONBACKEND_Response* response, const uint32_t,
                                               TRITONSERVER_Error* e) {
  if (response->sent) return error("sent twice");
  response->sent = true;
  if (e) {
    response->error = e->message;
    delete e;
  }
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request* request, const bool success,
    const uint64_t a, const uint64_t b, const uint64_t c, const uint64_t d) {
  request->reported = true;
  request->success = success;
  uint64_t t[4] = {a, b, c, d};
  std::copy(t, t + 4, request->times);
  return nullptr;
}
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance*, const uint64_t batch, const uint64_t a, const uint64_t b,
    const uint64_t c, const uint64_t d) {
  fake::batches.push_back({batch, {a, b, c, d}});
  return nullptr;
}

}  // extern "C"
