// An engine's per-table counts (an embedding store's lookups and device hits) as Triton
// counters on the server's metrics port, named and labelled (model, table) as the python
// sparse model exports them (deploybench.ensemble.metrics reads both).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine.h"
#include "triton_api.h"

namespace deploybench {

class TableMetrics {
 public:
  // Throws where the server refuses a metric (it logs nothing then: the caller says why).
  TableMetrics(const std::string& model, size_t tables);
  ~TableMetrics();
  TableMetrics(const TableMetrics&) = delete;
  TableMetrics& operator=(const TableMetrics&) = delete;
  // Adds what the counts gained since the last call.
  void update(const TableCounts& counts);

 private:
  std::vector<TRITONSERVER_Metric*> lookups_, hits_;
  std::vector<uint64_t> seen_lookups_, seen_hits_;
};

}  // namespace deploybench
