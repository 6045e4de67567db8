#include "metrics.h"

#include <mutex>
#include <stdexcept>

#include "util.h"

namespace deploybench {
namespace {

// One family a name for the process: every model's and instance's metrics are its members
// (the same labels make the same metric, whose counts then add up).
TRITONSERVER_MetricFamily* family(const char* name, const char* description) {
  static std::mutex mutex;
  static std::vector<std::pair<std::string, TRITONSERVER_MetricFamily*>> families;
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [known, made] : families)
    if (known == name) return made;
  TRITONSERVER_MetricFamily* made = nullptr;
  check(TRITONSERVER_MetricFamilyNew(&made, TRITONSERVER_METRIC_KIND_COUNTER, name, description),
        std::string("metric family ") + name);
  families.emplace_back(name, made);
  return made;
}

TRITONSERVER_Metric* metric(TRITONSERVER_MetricFamily* of, const std::string& model,
                            size_t table) {
  std::string index = std::to_string(table);
  const TRITONSERVER_Parameter* labels[] = {
      TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, model.c_str()),
      TRITONSERVER_ParameterNew("table", TRITONSERVER_PARAMETER_STRING, index.c_str())};
  TRITONSERVER_Metric* made = nullptr;
  std::string error = failed(TRITONSERVER_MetricNew(&made, of, labels, 2));
  for (const TRITONSERVER_Parameter* label : labels)
    TRITONSERVER_ParameterDelete(const_cast<TRITONSERVER_Parameter*>(label));
  if (!error.empty()) throw std::runtime_error("metric of table " + index + ": " + error);
  return made;
}

}  // namespace

TableMetrics::TableMetrics(const std::string& model, size_t tables)
    : seen_lookups_(tables, 0), seen_hits_(tables, 0) {
  TRITONSERVER_MetricFamily* lookups = family(
      "deploybench_embedding_lookups_total", "embedding lookups of the sparse model, per table");
  TRITONSERVER_MetricFamily* hits = family("deploybench_embedding_cache_hits_total",
                                           "lookups served from the device cache, per table");
  for (size_t i = 0; i < tables; ++i) {
    lookups_.push_back(metric(lookups, model, i));
    hits_.push_back(metric(hits, model, i));
  }
}

TableMetrics::~TableMetrics() {
  for (auto* m : lookups_) failed(TRITONSERVER_MetricDelete(m));
  for (auto* m : hits_) failed(TRITONSERVER_MetricDelete(m));
}

void TableMetrics::update(const TableCounts& counts) {
  for (size_t i = 0; i < lookups_.size(); ++i) {
    uint64_t n = counts.lookups->at(i), h = counts.hits->at(i);
    if (n != seen_lookups_[i]) failed(TRITONSERVER_MetricIncrement(lookups_[i], double(n - seen_lookups_[i])));
    if (h != seen_hits_[i]) failed(TRITONSERVER_MetricIncrement(hits_[i], double(h - seen_hits_[i])));
    seen_lookups_[i] = n;
    seen_hits_[i] = h;
  }
}

}  // namespace deploybench
