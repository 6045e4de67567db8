// Host buffers read or written in place that a client can take away from under the server:
// a system shared-memory region is a file Triton maps, and a file truncated after it was
// mapped answers a read or write of its lost pages with SIGBUS, which would end the server
// (and every other client's requests). While an instance reads its requests' host buffers
// and writes their outputs, it watches their ranges: a SIGBUS inside one of them has the
// lost page replaced by a page of zeros (the access goes on), the watch marked faulted and
// the page remembered as lost, so that the request that named it, and any later request
// that names it, fails with an error instead. A SIGBUS anywhere else goes to the handler
// that was there before (by default: the server ends, as it would have).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace deploybench {

struct Range {
  uintptr_t begin, end;
};

class RegionWatch {
 public:
  RegionWatch();  // installs the process's SIGBUS handler once
  ~RegionWatch();
  RegionWatch(const RegionWatch&) = delete;
  RegionWatch& operator=(const RegionWatch&) = delete;
  // The ranges watched from now on (the vector must stay as it is until the next call).
  void watch(const std::vector<Range>& ranges);
  void clear() { watch({}); }
  // Whether an access faulted since the last call, cleared.
  bool faulted() { return faulted_.exchange(false); }

  // For the handler (async-signal-safe): whether `address` lies in a watched range, marked.
  bool claim(uintptr_t address);

 private:
  std::atomic<const Range*> ranges_{nullptr};
  std::atomic<size_t> count_{0};
  std::atomic<bool> faulted_{false};
  int slot_ = -1;
};

// Whether [data, data + bytes) holds a page lost to a truncation (a page of zeros now): a
// request naming it fails. A lost page that the server has since mapped anew (the region
// registered again) no longer counts.
bool lost(const void* data, size_t bytes);

}  // namespace deploybench
