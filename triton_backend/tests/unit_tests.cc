// The backend's parts that need no server, against known answers: Triton's data types as
// ATen's; an instance's gather and scatter of every data type it serves (requests of several
// batch sizes, an input split over buffers, each response holding its own rows, statistics in
// order, the batch's the same, none left at 0); ONNX Runtime's engine over an identity graph
// of each type the pipeline serves; requests of a wrong type or shape failing alone, and one
// of a bad value in a batch (found after the run) failing alone, its error cut to the
// client's; the embedding store's lookups equal
// to a plain gather on every row, hit and miss, with a cache smaller than the tables, its
// refresh and counts; its metrics; the .npy reader's refusals; a trace's convolutions made
// strict FP32; the host copier's copies split over threads, byte for byte. Run by tests/unit/test_cpp_unit.py.
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/runtime/graph_iterator.h>
#include <torch/script.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>

#include "../embeddings.h"
#include "../host_copy.h"
#include "../instance.h"
#include "../model.h"
#include "fake_triton.h"

using namespace deploybench;

namespace {

int failures = 0;
#define EXPECT(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                             \
    }                                                                         \
  } while (false)

// Runs `body`, which must throw an exception whose text contains every one of `words`.
void check_throws(const std::function<void()>& body, const std::vector<std::string>& words,
                  const char* what) {
  try {
    body();
  } catch (const std::exception& e) {
    for (const auto& w : words)
      if (std::string(e.what()).find(w) == std::string::npos) {
        std::fprintf(stderr, "%s: the error '%s' does not say '%s'\n", what, e.what(), w.c_str());
        ++failures;
      }
    return;
  }
  std::fprintf(stderr, "%s: nothing was thrown\n", what);
  ++failures;
}

const std::vector<std::string> kTypes{"BOOL", "UINT8", "INT8", "INT16", "INT32",
                                      "INT64", "FP16", "FP32", "FP64", "BF16"};

TRITONSERVER_DataType triton_of(const std::string& name) {
  return triton_type(aten_type("TYPE_" + name, "t"));
}

ModelSpec spec_of(const std::string& type, int64_t max_batch, const std::string& runner,
                  const std::string& extra_parameters = "",
                  const std::string& directory = "/nowhere") {
  std::string json = R"({"name": "m", "max_batch_size": )" + std::to_string(max_batch) +
                     R"(, "input": [{"name": "x", "data_type": "TYPE_)" + type +
                     R"(", "dims": ["3"]}], "output": [{"name": "y", "data_type": "TYPE_)" +
                     type + R"(", "dims": ["3"]}], "parameters": {"runner": {"string_value": ")" +
                     runner + "\"}" + extra_parameters + "}}";
  return ModelSpec::from_config(json, directory);
}

// Its input back, as a new tensor: what the batch held, row by row.
class Echo : public Engine {
 public:
  bool takes_half() const override { return false; }
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    return {inputs.at(0).clone()};
  }
};

// Requests of batch 1, 2 (its input in two buffers) and 3 of distinct values of `type`.
std::vector<TRITONBACKEND_Request> requests_of(const std::string& type) {
  std::vector<TRITONBACKEND_Request> requests(3);
  int64_t base = 0;
  for (int64_t i = 0; i < 3; ++i) {
    int64_t batch = i + 1;
    at::Tensor values = at::arange(base, base + batch * 3, at::kLong).remainder(97);
    if (type == "BOOL") values = values.remainder(2);
    values = values.to(aten_type("TYPE_" + type, "x")).contiguous();
    std::vector<uint8_t> bytes(static_cast<uint8_t*>(values.data_ptr()),
                               static_cast<uint8_t*>(values.data_ptr()) + values.nbytes());
    requests[i].inputs.push_back(
        fake::input("x", triton_of(type), {batch, 3}, bytes, i == 1 ? 2 : 1));
    requests[i].outputs = {"y"};
    base += batch * 3 + 5;
  }
  return requests;
}

void execute(Instance& instance, std::vector<TRITONBACKEND_Request>& requests) {
  std::vector<TRITONBACKEND_Request*> pointers;
  for (auto& r : requests) pointers.push_back(&r);
  instance.execute(pointers.data(), static_cast<uint32_t>(pointers.size()));
}

void test_types() {
  for (const auto& name : kTypes) {
    TRITONSERVER_DataType t = triton_of(name);
    EXPECT(std::string(type_name(t)) == name);
    EXPECT(aten_type(t, "t") == aten_type("TYPE_" + name, "t"));
  }
  EXPECT(aten_type("TYPE_INT32", "t") == at::kInt);
  EXPECT(aten_type("TYPE_INT64", "t") == at::kLong);
  EXPECT(aten_type("TYPE_FP16", "t") == at::kHalf);
  EXPECT(aten_type("TYPE_BF16", "t") == at::kBFloat16);
  check_throws([] { aten_type(TRITONSERVER_TYPE_BYTES, "text"); },
               {"'text'", "BYTES", "cannot serve"}, "BYTES");
}

void test_gather_scatter(const std::string& type) {
  ModelSpec spec = spec_of(type, 8, "identity");
  Instance instance(nullptr, spec, at::kCPU, std::make_unique<Echo>());
  auto requests = requests_of(type);
  size_t reported = fake::batches.size();
  execute(instance, requests);
  for (auto& r : requests) {
    EXPECT(r.released && r.response && r.response->sent);
    EXPECT(r.response->error.empty());
    if (!r.response->error.empty()) std::fprintf(stderr, "%s: %s\n", type.c_str(), r.response->error.c_str());
    if (r.response->outputs.size() != 1) { ++failures; continue; }
    const auto* out = r.response->outputs[0];
    EXPECT(out->name == "y" && out->type == triton_of(type));
    EXPECT(out->shape == r.inputs[0].shape);
    std::vector<uint8_t> sent;
    for (const auto& b : r.inputs[0].buffers) sent.insert(sent.end(), b.begin(), b.end());
    EXPECT(out->data == sent);  // its own rows, every byte (the buffer was poisoned)
    EXPECT(r.reported && r.success);
    EXPECT(r.times[0] > 0 && r.times[0] <= r.times[1] && r.times[1] <= r.times[2] &&
          r.times[2] <= r.times[3]);
  }
  EXPECT(fake::batches.size() == reported + 1 && fake::batches.back().batch == 6);
  // the batch's statistics: the same four times as each of its requests', none left at 0
  // (perf_analyzer's compute input and infer are their differences)
  const auto& batch = fake::batches.back();
  EXPECT(batch.times[0] > 0 && batch.times[1] > 0);
  for (auto& r : requests)
    EXPECT(std::equal(r.times, r.times + 4, batch.times));
}

// ONNX Runtime's engine over an identity graph of each data type the pipeline serves (made by
// tests/unit/test_cpp_unit.py in DEPLOYBENCH_TEST_ONNX_DIR): every request's rows come back as
// sent, in its type (an INT32 input bound or read back as INT64 fails here, in seconds).
void test_onnxruntime_types() {
  const char* dir = std::getenv("DEPLOYBENCH_TEST_ONNX_DIR");
  if (dir == nullptr) return;
  for (const std::string type : {"FP32", "FP16", "INT32", "INT64", "BOOL"}) {
    ModelSpec spec = spec_of(type, 8, "onnxruntime",
                             R"(, "artifact": {"string_value": "identity_)" + type + R"(.onnx"})",
                             dir);
    Instance instance(nullptr, spec, at::kCPU);
    auto requests = requests_of(type);
    execute(instance, requests);
    for (auto& r : requests) {
      EXPECT(r.response && r.response->error.empty() && r.success);
      if (!r.response || !r.response->error.empty()) {
        std::fprintf(stderr, "onnxruntime %s: %s\n", type.c_str(),
                     r.response ? r.response->error.c_str() : "no response");
        continue;
      }
      const auto* out = r.response->outputs.at(0);
      std::vector<uint8_t> sent;
      for (const auto& b : r.inputs[0].buffers) sent.insert(sent.end(), b.begin(), b.end());
      EXPECT(out->type == triton_of(type) && out->shape == r.inputs[0].shape);
      EXPECT(out->data == sent);
    }
  }
}

void test_wrong_requests_fail_alone() {
  ModelSpec spec = spec_of("INT32", 8, "identity");
  Instance instance(nullptr, spec, at::kCPU, std::make_unique<Echo>());
  auto requests = requests_of("INT32");
  std::vector<int64_t> wide{1, 2, 3};
  requests[1].inputs[0] = fake::input("x", TRITONSERVER_TYPE_INT64, {1, 3}, wide);
  std::vector<int32_t> narrow{1, 2, 3, 4};
  requests[2].inputs[0] = fake::input("x", TRITONSERVER_TYPE_INT32, {1, 4}, narrow);
  execute(instance, requests);
  EXPECT(requests[0].response->error.empty() && requests[0].response->outputs.size() == 1);
  const std::string& type_error = requests[1].response->error;
  EXPECT(type_error.find("INT64") != std::string::npos &&
        type_error.find("INT32") != std::string::npos);
  EXPECT(requests[2].response->error.find("[1, 4]") != std::string::npos);
  for (auto& r : requests) EXPECT(r.released && r.response->sent);
  EXPECT(!requests[1].success && !requests[2].success && requests[0].success);
}

// Its input back; a negative value fails the run at check_run(), after the synchronisation,
// as the embedding store on a GPU checks its keys, with a traceback naming a server's file.
class Picky : public Engine {
 public:
  bool takes_half() const override { return false; }
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    negative_ = inputs.at(0).lt(0).any().item<bool>();
    return {inputs.at(0).clone()};
  }
  void check_run() override {
    ++checks;
    if (negative_)
      throw std::runtime_error(
          "The following operation failed in the TorchScript interpreter.\nTraceback of "
          "TorchScript (most recent call last):\n  File \"/srv/models/picky.py\", line 7\n"
          "RuntimeError: index -1 is out of range (see /srv/models/table.npy)\n");
  }
  int checks = 0;

 private:
  bool negative_ = false;
};

void test_a_bad_value_fails_only_its_request() {
  ModelSpec spec = spec_of("INT32", 8, "identity");
  auto engine = std::make_unique<Picky>();
  Picky& picky = *engine;
  Instance instance(nullptr, spec, at::kCPU, std::move(engine));
  auto requests = requests_of("INT32");
  std::vector<int32_t> bad{4, -1, 6};
  requests[1].inputs[0] = fake::input("x", TRITONSERVER_TYPE_INT32, {1, 3}, bad);
  size_t logged = fake::log.size();
  execute(instance, requests);
  for (size_t i : {0, 2}) {  // their own rows: run again without the bad one
    EXPECT(requests[i].response->error.empty() && requests[i].success);
    EXPECT(requests[i].response->outputs.size() == 1 &&
           requests[i].response->outputs[0]->data == requests[i].inputs[0].buffers[0]);
  }
  const std::string& error = requests[1].response->error;
  EXPECT(!requests[1].success && requests[1].released && requests[1].response->sent);
  EXPECT(error == "model 'm': RuntimeError: index -1 is out of range (see <server path>)");
  if (error.find("out of range") == std::string::npos) std::fprintf(stderr, "%s\n", error.c_str());
  EXPECT(picky.checks == 4);  // the batch, then each request alone, each one checked
  bool told = false;  // the server log: the batch's failure, with the whole text
  for (size_t i = logged; i < fake::log.size(); ++i)
    told |= fake::log[i].find("failed a batch of 3 requests (5 samples), each is run alone") !=
                std::string::npos &&
            fake::log[i].find("/srv/models/picky.py") != std::string::npos;
  EXPECT(told);
}

// ---- embeddings -------------------------------------------------------------------------

void write_npy(const std::string& path, const at::Tensor& t, const std::string& descr) {
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
std::string sparse_folder(const std::vector<int64_t>& sizes, int64_t dim) {
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
at::Tensor keys_of(const std::vector<int64_t>& sizes, int64_t samples, std::mt19937& random) {
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

// Convolutions of a trace (DEPLOYBENCH_TEST_TRACE: made with TF32 allowed, as torch traces
// by default) that may use TF32, over every method of every submodule.
int convolutions_allowing_tf32(torch::jit::Module& module) {
  int found = 0;
  for (const torch::jit::Module& part : module.modules())
    for (const torch::jit::Method& method : part.get_methods()) {
      std::shared_ptr<torch::jit::Graph> graph = method.graph();
      torch::jit::DepthFirstGraphNodeIterator nodes(graph);
      while (torch::jit::Node* node = nodes.next())
        if (node->kind().toQualString() == std::string("aten::_convolution"))
          found += torch::jit::toIValue(node->input(12))->toBool();
    }
  return found;
}

void test_strict_convolutions() {
  const char* path = std::getenv("DEPLOYBENCH_TEST_TRACE");
  if (path == nullptr) return;  // test_cpp_unit.py makes one
  torch::jit::Module module = torch::jit::load(path);
  at::Tensor x = at::randn({2, 4, 16});
  at::Tensor before = module.forward({x}).toTensor();
  int allowing = convolutions_allowing_tf32(module);
  EXPECT(allowing == 2);  // a convolution of its own and one of a submodule
  EXPECT(strict_convolutions(module) == allowing);
  EXPECT(convolutions_allowing_tf32(module) == 0);
  EXPECT(at::equal(module.forward({x}).toTensor(), before));  // on the CPU: the same numbers
}

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

}  // namespace

int main() {
  c10::InferenceMode inference;
  test_types();
  for (const auto& type : kTypes) test_gather_scatter(type);
  test_wrong_requests_fail_alone();
  test_a_bad_value_fails_only_its_request();
  test_onnxruntime_types();
  test_embeddings_equal_a_plain_gather();
  test_the_cache_refreshes();
  test_embedding_metrics();
  test_npy_refusals();
  test_strict_convolutions();
  test_host_copies();
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
