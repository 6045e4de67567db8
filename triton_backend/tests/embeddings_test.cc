// The embedding store's lookups equal to a plain gather on every row, hit and miss, with a
// cache smaller than the tables; its refresh and counts; its metrics; the .npy reader's
// refusals.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "../embeddings.h"

#include "unit.h"

namespace deploybench::unit {

static void write_npy(const std::string& path, const at::Tensor& t, const std::string& descr) {
  std::string shape = "(";
  for (int64_t i = 0; i < t.dim(); ++i) shape += std::to_string(t.size(i)) + ", ";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(static_cast<const char*>(t.data_ptr()), t.nbytes());
}

// A sparse export of tables of `sizes` rows of `dim`: random rows; each table ranked by
// row (row 0 most frequent).
static std::string sparse_folder(const std::vector<int64_t>& sizes, int64_t dim) {
  static int made = 0;
  auto dir = std::filesystem::temp_directory_path() /
             ("deploybench-unit-" + std::to_string(getpid()) + "-" + std::to_string(made++));
  std::filesystem::create_directories(dir);
  int64_t rows = 0;
  std::string list;
  for (int64_t n : sizes) {
    list += (rows ? ", " : "") + std::to_string(n);
    rows += n;
  }
  write_npy(dir / "embeddings.npy", at::randn({rows, dim}), "<f4");
  write_npy(dir / "ranking.npy", at::arange(rows, at::kLong), "<i8");
  std::ofstream(dir / "sparse.json") << "{\"table_sizes\": [" << list
                                     << "], \"embedding_dim\": " << dim << "}";
  return dir;
}

// Keys of `samples` samples: each table's id drawn with a skew (small rows often), as rows
// of the fused table.
static at::Tensor keys_of(const std::vector<int64_t>& sizes, int64_t samples, std::mt19937& random) {
  std::vector<int64_t> keys;
  for (int64_t s = 0; s < samples; ++s) {
    int64_t offset = 0;
    for (int64_t n : sizes) {
      std::geometric_distribution<int64_t> skewed(3.0 / n);
      keys.push_back(offset + std::min(n - 1, skewed(random)));
      offset += n;
    }
  }
  return at::tensor(keys, at::kLong);
}

void test_embeddings_equal_a_plain_gather() {
  std::vector<int64_t> sizes{500, 300, 200};
  std::string dir = sparse_folder(sizes, 8);
  MappedFile file(dir + "/embeddings.npy");
  at::Tensor table = npy_tensor(file, dir + "/embeddings.npy").clone();
  EmbeddingStore store(dir, at::kCPU, {"cache", 0.1, 0.5});
  EXPECT(!store.whole() && store.cached_rows() == 100);
  std::mt19937 random(7);
  uint64_t lookups = 0;
  for (int batch = 0; batch < 200; ++batch) {
    at::Tensor keys = keys_of(sizes, 64, random);
    if (batch % 10 == 0) keys[5] = 999;  // a row of the last table that no ranking caches
    at::Tensor got = store.lookup(keys);
    at::Tensor want = table.index_select(0, keys).view({64, 3 * 8});
    EXPECT(at::equal(got, want));
    lookups += 64;
  }
  uint64_t hits = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT(store.lookups()[i] == lookups);
    EXPECT(store.hits()[i] <= lookups);
    hits += store.hits()[i];
  }
  EXPECT(hits > 0 && hits < 3 * lookups);  // hits and misses both served
  EmbeddingStore whole(dir, at::kCPU, {"fit", 0.1, 0.5});
  EXPECT(whole.whole());
  at::Tensor keys = keys_of(sizes, 16, random);
  EXPECT(at::equal(whole.lookup(keys), table.index_select(0, keys).view({16, 24})));
  EXPECT(whole.hits() == whole.lookups() && whole.lookups()[0] == 16);
  check_throws([&] { store.lookup(at::tensor(std::vector<int64_t>{0, 1, 1000}, at::kLong)); },
               {"outside", "1000 rows", "max 1000"}, "a key past the table");
  check_throws([&] { whole.lookup(at::tensor(std::vector<int64_t>{-1, 1, 2}, at::kLong)); },
               {"outside", "1000 rows", "min -1"}, "a negative key");
  check_throws([&] { store.lookup(at::tensor(std::vector<int64_t>{0, 1}, at::kLong)); },
               {"2 keys", "3 tables"}, "a part sample");
}

// The refresh: rows the batches ask for, uncached at load, are cached after a few batches,
// in the place of rows that were looked up once but not since the clock hand passed them.
void test_the_cache_refreshes() {
  std::vector<int64_t> sizes{1000};
  std::string dir = sparse_folder(sizes, 4);
  MappedFile file(dir + "/embeddings.npy");
  at::Tensor table = npy_tensor(file, dir + "/embeddings.npy").clone();
  EmbeddingStore store(dir, at::kCPU, {"cache", 0.1, 0.5});
  at::Tensor loaded = at::arange(0, 100, at::kLong);  // the ranking's first rows: cached
  store.lookup(loaded);
  EXPECT(store.hits()[0] == 100);
  at::Tensor keys = at::arange(900, 940, at::kLong);  // its last rows
  for (int i = 0; i < 20; ++i) EXPECT(at::equal(store.lookup(keys), table.index_select(0, keys)));
  uint64_t before = store.hits()[0];
  store.lookup(keys);
  EXPECT(store.hits()[0] - before == 40);  // every one of them cached by now
  before = store.hits()[0];
  EXPECT(at::equal(store.lookup(loaded), table.index_select(0, loaded)));
  EXPECT(store.hits()[0] - before == 60);  // 40 of the first rows made room for them
}

void test_embedding_metrics() {
  std::vector<int64_t> sizes{50, 30};
  std::string dir = sparse_folder(sizes, 4);
  std::string json = R"({"name": "rec-sparse", "max_batch_size": 0, "input": [
      {"name": "EMB_KEY", "data_type": "TYPE_INT64", "dims": ["-1"]},
      {"name": "EMB_N_KEY", "data_type": "TYPE_INT32", "dims": ["1"]}],
    "output": [{"name": "LOOKUP", "data_type": "TYPE_FP32", "dims": ["-1", "8"]}],
    "parameters": {"runner": {"string_value": "embeddings"},
                   "artifact": {"string_value": "."},
                   "placement": {"string_value": "cache"},
                   "cache_fraction": {"string_value": "0.2"}}})";
  ModelSpec spec = ModelSpec::from_config(json, dir);
  Instance instance(nullptr, spec, at::kCPU);
  std::vector<TRITONBACKEND_Request> requests(2);
  std::vector<int64_t> keys{0, 50, 1, 51, 49, 79};  // 3 samples: rows 0, 1 cached, 49 not
  std::vector<int32_t> count{6}, wrong{5};
  for (int i = 0; i < 2; ++i) {
    requests[i].inputs = {fake::input("EMB_KEY", TRITONSERVER_TYPE_INT64, {6}, keys),
                          fake::input("EMB_N_KEY", TRITONSERVER_TYPE_INT32, {1}, i ? wrong : count)};
    requests[i].outputs = {"LOOKUP"};
  }
  execute(instance, requests);
  EXPECT(requests[0].response->error.empty());
  EXPECT(requests[1].response->error.find("says 5 keys") != std::string::npos);
  EXPECT(requests[0].response->outputs.at(0)->shape == (std::vector<int64_t>{3, 8}));
  EXPECT(fake::metric("deploybench_embedding_lookups_total", "0") == 3);
  EXPECT(fake::metric("deploybench_embedding_cache_hits_total", "0") == 2);  // rows 0, 1
  EXPECT(fake::metric("deploybench_embedding_cache_hits_total", "1") == 2);  // rows 50, 51
}

void test_npy_refusals() {
  std::string dir = sparse_folder({10}, 2);
  write_npy(dir + "/other.npy", at::zeros({3}, at::kDouble), "<f8");
  MappedFile file(dir + "/other.npy");
  check_throws([&] { npy_tensor(file, "other.npy"); }, {"other.npy", "'<f8'", "valid"}, "<f8");
  check_throws([&] { MappedFile missing(dir + "/none.npy"); }, {"none.npy"}, "a missing file");
}

}  // namespace deploybench::unit
