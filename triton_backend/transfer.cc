// An instance's data movement: the requests' inputs gathered into one batch where the engine
// runs (read in place where they already lie there), and the outputs scattered into the
// buffers Triton gives each response.
#include <cstring>
#include <map>
#include <stdexcept>

#include "instance.h"
#include "util.h"

namespace deploybench {
namespace {

at::TensorOptions bytes_on(at::Device device) {
  return at::TensorOptions().dtype(at::kByte).device(device);
}

constexpr int64_t kAlign = 256;  // each input's place in a packed batch
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct Chunk {
  const void* data;
  int64_t bytes;
  at::Device device;
};

}  // namespace

std::vector<at::Tensor> Instance::placeholders(const std::vector<Request*>& group,
                                               int64_t total) {
  TRITONBACKEND_Input* input = nullptr;
  const void* data = nullptr;
  uint64_t size = 0;
  TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
  int64_t id = 0;
  const std::string& first = model_.inputs.at(0).name;
  check(TRITONBACKEND_RequestInput(group[0]->request, first.c_str(), &input), first);
  check(TRITONBACKEND_InputBuffer(input, 0, &data, &size, &type, &id), first);
  std::vector<at::Tensor> inputs;
  for (size_t i = 0; i < model_.inputs.size(); ++i) {
    std::vector<int64_t> shape = group[0]->shapes[i];
    if (model_.max_batch_size > 0) shape[0] = total;
    inputs.push_back(at::empty(shape, at::TensorOptions()
                                          .dtype(model_.inputs[i].dtype)
                                          .device(memory_device(type, id))));
  }
  return inputs;
}

std::vector<at::Tensor> Instance::gather(const std::vector<Request*>& group, int64_t total,
                                         bool* copied) {
  struct Copy {
    size_t input;
    std::vector<int64_t> shape;
    std::vector<Chunk> chunks;
    int64_t bytes, offset;
  };
  std::vector<at::Tensor> inputs(model_.inputs.size());
  std::vector<Copy> copies;
  int64_t packed = 0;
  for (size_t i = 0; i < model_.inputs.size(); ++i) {
    const TensorSpec& spec = model_.inputs[i];
    std::vector<int64_t> shape = group[0]->shapes[i];
    if (model_.max_batch_size > 0) shape[0] = total;
    int64_t bytes = c10::elementSize(spec.dtype);
    for (int64_t d : shape) bytes *= d;
    std::vector<Chunk> chunks;
    int64_t got = 0;
    for (const Request* r : group) {
      TRITONBACKEND_Input* input = nullptr;
      uint32_t buffers = 0;
      check(TRITONBACKEND_RequestInput(r->request, spec.name.c_str(), &input), spec.name);
      check(TRITONBACKEND_InputProperties(input, nullptr, nullptr, nullptr, nullptr, nullptr,
                                          &buffers),
            spec.name);
      for (uint32_t b = 0; b < buffers; ++b) {
        const void* data = nullptr;
        uint64_t size = 0;
        TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
        int64_t id = 0;
        check(TRITONBACKEND_InputBuffer(input, b, &data, &size, &type, &id), spec.name);
        if (type != TRITONSERVER_MEMORY_GPU) watch(data, size, "input '" + spec.name + "'");
        chunks.push_back({data, static_cast<int64_t>(size), memory_device(type, id)});
        got += static_cast<int64_t>(size);
      }
    }
    if (got != bytes)
      throw std::runtime_error("input '" + spec.name + "' holds " + std::to_string(got) +
                               " bytes where its shape " + shape_text(shape) + " needs " +
                               std::to_string(bytes));
    auto options = at::TensorOptions().dtype(spec.dtype);
    at::Device where = engine_->host_input(i) ? at::Device(at::kCPU) : device_;
    if (chunks.size() == 1 && chunks[0].device == where) {  // read in place
      inputs[i] = at::from_blob(const_cast<void*>(chunks[0].data), shape, options.device(where));
    } else if (bytes == 0 || where != device_) {
      inputs[i] = at::empty(shape, options.device(where));
      int64_t at = 0;  // a host input's chunks (small: a count) copied one by one
      for (const Chunk& chunk : chunks) {
        inputs[i].view(at::kByte).view({-1}).narrow(0, at, chunk.bytes).copy_(
            at::from_blob(const_cast<void*>(chunk.data), {chunk.bytes}, bytes_on(chunk.device)));
        at += chunk.bytes;
      }
    } else {
      copies.push_back({i, shape, std::move(chunks), bytes, packed});
      packed += aligned(bytes);
    }
  }
  *copied = !copies.empty();
  if (copies.empty()) return inputs;
  // The rest packed into one buffer on the instance's device: host chunks through the
  // batch itself (CPU) or one pinned staging buffer and a single upload (GPU); chunks in
  // GPU memory copied after that upload, on the same stream.
  at::Tensor batch = at::empty({packed}, bytes_on(device_));
  bool uploads = false;
  for (const Copy& c : copies)
    for (const Chunk& chunk : c.chunks) uploads |= device_.is_cuda() && chunk.device.is_cpu();
  uint8_t* host = uploads ? pinned(staging_in_, packed).data_ptr<uint8_t>()
                          : (device_.is_cpu() ? batch.data_ptr<uint8_t>() : nullptr);
  std::vector<HostCopy> host_copies;
  for (const Copy& c : copies) {
    int64_t at = c.offset;
    for (const Chunk& chunk : c.chunks) {
      if (chunk.device.is_cpu()) host_copies.push_back({host + at, chunk.data, chunk.bytes});
      at += chunk.bytes;
    }
  }
  copier_->copy(host_copies);
  if (uploads) batch.copy_(staging_in_.narrow(0, 0, packed), /*non_blocking=*/true);
  for (const Copy& c : copies) {
    int64_t at = c.offset;
    for (const Chunk& chunk : c.chunks) {
      if (!chunk.device.is_cpu())
        batch.narrow(0, at, chunk.bytes)
            .copy_(at::from_blob(const_cast<void*>(chunk.data), {chunk.bytes},
                                 bytes_on(chunk.device)),
                   /*non_blocking=*/true);
      at += chunk.bytes;
    }
    inputs[c.input] =
        batch.narrow(0, c.offset, c.bytes).view(model_.inputs[c.input].dtype).view(c.shape);
  }
  return inputs;
}

std::vector<at::Tensor> Instance::checked_outputs(std::vector<at::Tensor> outputs,
                                                  int64_t total) {
  if (outputs.size() != model_.outputs.size())
    throw std::runtime_error("the model returned " + std::to_string(outputs.size()) +
                             " outputs where its config declares " +
                             std::to_string(model_.outputs.size()));
  bool batching = model_.max_batch_size > 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorSpec& spec = model_.outputs[i];
    at::Tensor& t = outputs[i];
    // an FP16 model's floating outputs, as the config declares them (FP32)
    if (t.is_floating_point() && at::isFloatingType(spec.dtype) && t.scalar_type() != spec.dtype)
      t = t.to(spec.dtype);
    if (t.scalar_type() != spec.dtype)
      throw std::runtime_error("output '" + spec.name + "' is " +
                               type_name(triton_type(t.scalar_type())) +
                               " where the config declares " +
                               type_name(triton_type(spec.dtype)));
    std::vector<int64_t> want = spec.dims;
    if (batching) want.insert(want.begin(), total);
    bool fits = t.dim() == static_cast<int64_t>(want.size());
    for (size_t d = 0; fits && d < want.size(); ++d) fits = want[d] < 0 || want[d] == t.size(d);
    if (!fits)
      throw std::runtime_error("output '" + spec.name + "' has shape " + shape_text(t.sizes()) +
                               " where the config declares " + shape_text(want));
    t = t.contiguous();
  }
  return outputs;
}

void Instance::scatter(const std::vector<Request*>& group, const std::vector<at::Tensor>& outputs) {
  struct Target {
    size_t output;
    int64_t row, rows;  // the request's samples in the batch
    void* buffer;
    int64_t bytes;
    at::Device device;
    Request* request;
  };
  bool batching = model_.max_batch_size > 0;
  std::vector<Target> targets;
  int64_t row = 0;
  for (Request* r : group) {
    uint32_t count = 0;
    check(TRITONBACKEND_RequestOutputCount(r->request, &count), "requested outputs");
    for (uint32_t k = 0; k < count; ++k) {
      const char* name = nullptr;
      check(TRITONBACKEND_RequestOutputName(r->request, k, &name), "requested output");
      size_t i = 0;
      while (i < model_.outputs.size() && model_.outputs[i].name != name) ++i;
      if (i == model_.outputs.size())
        throw std::runtime_error(std::string("no output '") + name + "' in the config");
      at::Tensor slice = batching ? outputs[i].narrow(0, row, r->batch) : outputs[i];
      std::vector<int64_t> shape = slice.sizes().vec();
      TRITONBACKEND_Output* output = nullptr;
      check(TRITONBACKEND_ResponseOutput(r->response, &output, name,
                                         triton_type(slice.scalar_type()), shape.data(),
                                         static_cast<uint32_t>(shape.size())),
            name);
      int64_t bytes = slice.numel() * static_cast<int64_t>(slice.element_size());
      // asked for where the engine ran; Triton answers where the client wants it
      TRITONSERVER_MemoryType type =
          device_.is_cuda() ? TRITONSERVER_MEMORY_GPU : TRITONSERVER_MEMORY_CPU;
      int64_t id = device_.is_cuda() ? device_.index() : 0;
      void* buffer = nullptr;
      check(TRITONBACKEND_OutputBuffer(output, &buffer, bytes, &type, &id), name);
      if (bytes > 0 && type != TRITONSERVER_MEMORY_GPU && r->error.empty()) {
        try {  // a request's lost output region fails that request alone
          watch(buffer, static_cast<uint64_t>(bytes), std::string("output '") + name + "'");
        } catch (const std::invalid_argument& e) {
          r->error = e.what();
        }
      }
      if (bytes > 0 && r->error.empty())
        targets.push_back({i, batching ? row : 0, slice.size(0), buffer, bytes,
                           memory_device(type, id), r});
    }
    row += r->batch;
  }
  // Host buffers of outputs on a GPU: each output downloaded once into pinned memory.
  std::map<size_t, at::Tensor> on_host;
  int64_t needed = 0;
  for (const Target& t : targets)
    if (t.device.is_cpu() && outputs[t.output].is_cuda() && !on_host.count(t.output)) {
      on_host[t.output] = at::Tensor();
      needed += aligned(outputs[t.output].nbytes());
    }
  if (needed > 0) {
    at::Tensor& staging = pinned(staging_out_, needed);
    int64_t at = 0;
    for (auto& [i, host] : on_host) {
      host = staging.narrow(0, at, outputs[i].nbytes()).view(outputs[i].scalar_type())
                 .view(outputs[i].sizes());
      host.copy_(outputs[i], /*non_blocking=*/true);
      at += aligned(outputs[i].nbytes());
    }
    synchronize();
  }
  std::vector<HostCopy> host_copies;
  for (const Target& t : targets) {
    const at::Tensor& source = on_host.count(t.output) ? on_host[t.output] : outputs[t.output];
    at::Tensor slice = batching ? source.narrow(0, t.row, t.rows) : source;
    if (t.device.is_cpu() && slice.is_cpu()) {
      host_copies.push_back({t.buffer, slice.data_ptr(), t.bytes});
    } else {
      at::from_blob(t.buffer, slice.sizes(), slice.options().device(t.device))
          .copy_(slice, /*non_blocking=*/true);
    }
  }
  copier_->copy(host_copies);
  if (region_watch_.faulted())  // truncated while written: those requests fail
    for (const Target& t : targets)
      if (t.device.is_cpu() && lost(t.buffer, static_cast<size_t>(t.bytes)))
        t.request->error = "output '" + model_.outputs[t.output].name + "' " + kTruncated;
}

}  // namespace deploybench
