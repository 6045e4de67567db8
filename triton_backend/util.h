// Small helpers both halves of an instance use: Triton's errors as text, time stamps,
// shapes as text, where a buffer lies, the cores this process may use.
#pragma once

#include <ATen/ATen.h>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>

#include "triton_api.h"

namespace deploybench {

inline uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Triton's error as text, the error freed; empty where there is none.
inline std::string failed(TRITONSERVER_Error* error) {
  if (error == nullptr) return "";
  std::string text = TRITONSERVER_ErrorMessage(error);
  TRITONSERVER_ErrorDelete(error);
  return text;
}

inline void check(TRITONSERVER_Error* error, const std::string& what) {
  std::string text = failed(error);
  if (!text.empty()) throw std::runtime_error(what + ": " + text);
}

inline void log_error(const std::string& text) {
  failed(TRITONSERVER_LogMessage(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, text.c_str()));
}

inline std::string shape_text(at::IntArrayRef shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

inline at::Device memory_device(TRITONSERVER_MemoryType type, int64_t id) {
  if (type == TRITONSERVER_MEMORY_GPU)
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(id));
  return at::Device(at::kCPU);
}

// The CPUs this process may run on (a measured server is pinned to its GPU's share).
inline int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace deploybench
