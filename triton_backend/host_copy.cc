#include "host_copy.h"

#include <algorithm>
#include <cstring>

namespace deploybench {

constexpr int64_t kPiece = 1 << 20;

HostCopier::HostCopier(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

HostCopier::~HostCopier() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void HostCopier::take_pieces() {
  for (size_t i = next_.fetch_add(1); i < pieces_.size(); i = next_.fetch_add(1))
    std::memcpy(pieces_[i].to, pieces_[i].from, static_cast<size_t>(pieces_[i].bytes));
}

void HostCopier::work() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || round_ != seen; });
      if (stopping_) return;
      seen = round_;
    }
    take_pieces();
    std::lock_guard<std::mutex> lock(mutex_);
    if (--working_ == 0) done_.notify_one();
  }
}

void HostCopier::copy(const std::vector<HostCopy>& copies) {
  int64_t total = 0;
  for (const HostCopy& c : copies) total += c.bytes;
  if (workers_.empty() || total < 2 * kPiece) {  // not worth waking anyone
    for (const HostCopy& c : copies) std::memcpy(c.to, c.from, static_cast<size_t>(c.bytes));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pieces_.clear();
    for (const HostCopy& c : copies)
      for (int64_t at = 0; at < c.bytes; at += kPiece)
        pieces_.push_back({static_cast<uint8_t*>(c.to) + at,
                           static_cast<const uint8_t*>(c.from) + at,
                           std::min(kPiece, c.bytes - at)});
    next_ = 0;
    working_ = workers_.size();
    ++round_;
  }
  wake_.notify_all();
  take_pieces();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return working_ == 0; });
}

}  // namespace deploybench
