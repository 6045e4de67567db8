// Host-to-host copies of an instance (requests' inputs into the pinned staging buffer or the
// batch, outputs into the responses' buffers), large ones split over threads of its own: one
// thread copies about 6 GB/s, and DLRM's keys at batch 65,536 are 13.6 MB a request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace deploybench {

struct HostCopy {
  void* to;
  const void* from;
  int64_t bytes;
};

class HostCopier {
 public:
  explicit HostCopier(int threads);  // the calling thread is one of them
  ~HostCopier();
  HostCopier(const HostCopier&) = delete;
  HostCopier& operator=(const HostCopier&) = delete;
  // Every copy done when it returns; copies of over a MiB are cut into MiB pieces.
  void copy(const std::vector<HostCopy>& copies);
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

 private:
  void work();
  void take_pieces();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<HostCopy> pieces_;
  std::atomic<size_t> next_{0};
  size_t working_ = 0;      // workers not yet through the current round
  uint64_t round_ = 0;      // bumped for each copy() that uses the workers
  bool stopping_ = false;
};

}  // namespace deploybench
