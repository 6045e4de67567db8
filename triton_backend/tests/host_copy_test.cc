#include <algorithm>
#include <random>

#include "../host_copy.h"

#include "unit.h"

namespace deploybench::unit {

// Copies of a byte, a MiB and several MiB (cut into pieces) land whole, round after round,
// on one thread and on four; nothing outside a destination is touched.
void test_host_copies() {
  std::mt19937 random(7);
  for (int threads : {1, 4}) {
    HostCopier copier(threads);
    EXPECT(copier.threads() == threads);
    for (int round = 0; round < 5; ++round) {
      std::vector<int64_t> sizes{1, 1 << 20, (5 << 20) + 3, 4096, (2 << 20) - 1};
      std::vector<std::vector<uint8_t>> from, to;
      std::vector<HostCopy> copies;
      for (int64_t n : sizes) {
        from.emplace_back(n);
        for (uint8_t& b : from.back()) b = static_cast<uint8_t>(random());
        to.emplace_back(n + 2, 0xAB);  // a guard byte each side
      }
      for (size_t i = 0; i < sizes.size(); ++i)
        copies.push_back({to[i].data() + 1, from[i].data(), sizes[i]});
      copier.copy(copies);
      for (size_t i = 0; i < sizes.size(); ++i) {
        EXPECT(std::equal(from[i].begin(), from[i].end(), to[i].begin() + 1));
        EXPECT(to[i].front() == 0xAB && to[i].back() == 0xAB);
      }
    }
  }
}

}  // namespace deploybench::unit
