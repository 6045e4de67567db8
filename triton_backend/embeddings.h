// The sparse part of a recommender ensemble in the server's process: embedding rows of the
// fused table (every table stacked, as the pipeline's sparse export writes them) looked up by
// the ensemble's keys, on the instance's device.
//
// Where the tables fit the device's share (placement "fit"), they are copied to the device
// whole and a lookup is one gather over all tables at once. Where they do not (or placement
// "cache"), a hierarchical store as Merlin HPS keeps it: the full tables in host memory (the
// export's file, memory-mapped), a device cache of `cache_fraction` of each table's rows,
// filled at load with each table's most frequent rows (the export's ranking) and refreshed as
// it serves: rows that missed replace cache rows that no lookup used since the clock hand last
// passed them (a bounded number a batch). A lookup's result is the full table's row, hit or
// miss; hits are counted per table.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace deploybench {

struct EmbeddingSettings {
  std::string placement = "fit";  // fit: whole tables on the device where they fit; cache
  double cache_fraction = 0.1;    // rows of each table cached, where a cache is used
  double device_share = 0.5;      // the share of the device's memory whole tables may take
};

// A read-only memory map of a file, unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A .npy file's array as a CPU tensor over its memory map (C order, little-endian float32 or
// int64 only); throws naming the file where it is anything else.
at::Tensor npy_tensor(const MappedFile& file, const std::string& path);

class EmbeddingStore {
 public:
  EmbeddingStore(const std::string& folder, at::Device device, const EmbeddingSettings& settings);

  // keys: INT64 [N], N a multiple of the table count, each sample's keys table by table (rows
  // of the fused table) -> FP32 [N / tables, tables * dim] on the device. Throws for a key
  // outside the fused table: at once, or, whole tables on a GPU, at check_keys() (the keys'
  // range read back with the run's synchronisation, a bad key clamped until then).
  at::Tensor lookup(const at::Tensor& keys);
  // Throws where the last lookup's keys were outside the fused table (its counts taken back).
  void check_keys();

  int64_t tables() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t dim() const { return dim_; }
  bool whole() const { return whole_; }
  int64_t cached_rows() const { return whole_ ? rows_ : cache_.size(0); }
  // Per table, since load: lookups and those served from device memory.
  const std::vector<uint64_t>& lookups() const { return lookups_; }
  const std::vector<uint64_t>& hits() const { return hits_; }
  std::string describe() const;

 private:
  std::string keys_outside() const;  // why range_'s keys are not all rows, or ""
  at::Tensor lookup_cached(const at::Tensor& keys);
  at::Tensor host_rows(const at::Tensor& keys);  // keys on the host -> rows, pinned on a GPU
  void refresh(const at::Tensor& keys, const at::Tensor& rows);
  void count(const at::Tensor& hit, int64_t samples);

  MappedFile storage_file_, ranking_file_;
  at::Tensor storage_;  // [rows, dim] over the memory map
  std::vector<int64_t> sizes_;
  int64_t rows_ = 0, dim_ = 0;
  at::Device device_;
  bool whole_ = false;
  at::Tensor table_;    // whole: every row on the device
  at::Tensor cache_;    // [slots, dim]
  at::Tensor slot_of_;  // INT32 [rows]: a row's cache slot, -1 where it has none
  at::Tensor owner_;    // INT64 [slots]: the row each slot holds
  at::Tensor used_;     // BOOL [slots]: looked up since the hand last passed
  int64_t hand_ = 0;
  at::Tensor staging_;  // pinned host rows of the misses (a GPU store)
  at::Tensor range_;    // the last lookup's smallest and largest key (pinned on a GPU)
  int64_t checked_samples_ = 0;  // its samples, where its keys are not yet checked
  std::vector<uint64_t> lookups_, hits_;
};

}  // namespace deploybench
