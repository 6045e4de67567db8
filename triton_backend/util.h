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

// An error as a client may see it: a TorchScript interpreter's traceback cut to its last
// line (the error itself), and every absolute path of the server's (a model's source files,
// the libraries') replaced, so that a request learns nothing of the server's files. The
// server log keeps the whole text.
inline std::string client_text(const std::string& error) {
  std::string text = error;
  if (text.find("Traceback") != std::string::npos) {
    size_t end = text.find_last_not_of(" \n");  // not npos: the text has a word
    size_t start = text.rfind('\n', end);
    size_t from = start == std::string::npos ? 0 : start + 1;
    size_t colon = text.find(": ");  // "model 'm': " where the first line begins with it
    std::string prefix = colon < text.find('\n') ? text.substr(0, colon + 2) : "";
    text = prefix + text.substr(from, end + 1 - from);
  }
  std::string out;
  for (size_t i = 0; i < text.size();) {
    bool starts = text[i] == '/' && (i == 0 || std::string(" \t\n'\"(=[,:").find(text[i - 1]) !=
                                                   std::string::npos);
    size_t end = starts ? text.find_first_of(" \t\n'\")],", i) : i;
    if (end == std::string::npos) end = text.size();
    if (starts && text.find('/', i + 1) < end) {  // a path of two parts at least
      out += "<server path>";
      i = end;
    } else {
      out += text[i++];
    }
  }
  return out;
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
