#include "embeddings.h"

#include <ATen/Parallel.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "engine.h"
#include "json.h"

#ifdef DEPLOYBENCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace deploybench {
namespace {

const char* const kMetadata = "sparse.json";  // what runners/embeddings.py names them
const char* const kStorage = "embeddings.npy";
const char* const kRanking = "ranking.npy";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A number of the header's dict: the text after `key` up to the next ',' or ')'.
std::string header_value(const std::string& header, const std::string& key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return "";
  at = header.find(':', at) + 1;
  size_t end = key == "shape" ? header.find(')', at) + 1 : header.find(',', at);
  std::string value = header.substr(at, end - at);
  value.erase(0, value.find_first_not_of(' '));
  return value;
}

// The device's memory a whole store may take: its share of the GPU's, or of the host's RAM.
double device_bytes(at::Device device) {
#ifdef DEPLOYBENCH_CUDA
  if (device.is_cuda())
    return static_cast<double>(at::cuda::getDeviceProperties(device.index())->totalGlobalMem);
#endif
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
}

}  // namespace

MappedFile::MappedFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  struct stat info {};
  fstat(fd, &info);
  size_ = static_cast<size_t>(info.st_size);
  void* map = size_ ? mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0) : nullptr;
  close(fd);
  if (map == MAP_FAILED) throw std::runtime_error("cannot map " + path + ": " + std::strerror(errno));
  data_ = static_cast<const uint8_t*>(map);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
}

at::Tensor npy_tensor(const MappedFile& file, const std::string& path) {
  const uint8_t* d = file.data();
  if (file.size() < 10 || std::memcmp(d, "\x93NUMPY", 6) != 0)
    throw std::runtime_error(path + " is not a .npy file");
  bool v1 = d[6] == 1;
  size_t header_len = v1 ? (d[8] | d[9] << 8) : (d[8] | d[9] << 8 | d[10] << 16 | d[11] << 24);
  size_t start = (v1 ? 10 : 12) + header_len;
  std::string header(reinterpret_cast<const char*>(d) + (v1 ? 10 : 12), header_len);
  std::string descr = header_value(header, "descr");
  at::ScalarType type;
  if (descr.rfind("'<f4'", 0) == 0) type = at::kFloat;
  else if (descr.rfind("'<i8'", 0) == 0) type = at::kLong;
  else throw std::runtime_error(path + " holds " + descr + " (valid: '<f4', '<i8')");
  if (header_value(header, "fortran_order").rfind("False", 0) != 0)
    throw std::runtime_error(path + " is in Fortran order (valid: C order)");
  std::vector<int64_t> shape;
  std::string dims = header_value(header, "shape");
  for (size_t at = dims.find_first_of("0123456789"); at != std::string::npos;
       at = dims.find_first_of("0123456789", dims.find_first_not_of("0123456789", at)))
    shape.push_back(std::strtoll(dims.c_str() + at, nullptr, 10));
  int64_t count = 1;
  for (int64_t n : shape) count *= n;
  if (start + count * c10::elementSize(type) > file.size())
    throw std::runtime_error(path + " is shorter than its header's shape says");
  return at::from_blob(const_cast<uint8_t*>(d + start), shape, at::TensorOptions().dtype(type));
}

EmbeddingStore::EmbeddingStore(const std::string& folder, at::Device device,
                               const EmbeddingSettings& settings)
    : storage_file_(folder + "/" + kStorage),
      ranking_file_(folder + "/" + kRanking),
      device_(device) {
  Json meta = Json::parse(read_text(folder + "/" + kMetadata));
  for (const Json& n : meta["table_sizes"].items) sizes_.push_back(n.integer());
  dim_ = meta["embedding_dim"].integer();
  storage_ = npy_tensor(storage_file_, folder + "/" + kStorage);
  for (int64_t n : sizes_) rows_ += n;
  if (sizes_.empty() || storage_.dim() != 2 || storage_.size(0) != rows_ ||
      storage_.size(1) != dim_ || storage_.scalar_type() != at::kFloat)
    throw std::runtime_error(folder + "/" + kStorage + " holds " + c10::str(storage_.sizes()) + " " +
                             std::string(c10::toString(storage_.scalar_type())) + "; " +
                             kMetadata + " says " + std::to_string(rows_) + " rows of " +
                             std::to_string(dim_) + " float32");
  if (settings.placement != "fit" && settings.placement != "cache")
    throw std::runtime_error("placement '" + settings.placement + "' is not valid (valid: fit, cache)");
  if (!(settings.cache_fraction >= 0 && settings.cache_fraction <= 1))
    throw std::runtime_error("cache_fraction " + std::to_string(settings.cache_fraction) +
                             " is not within [0, 1]");
  lookups_.assign(sizes_.size(), 0);
  hits_.assign(sizes_.size(), 0);
  double bytes = static_cast<double>(storage_.nbytes());
  whole_ = settings.placement == "fit" && bytes <= settings.device_share * device_bytes(device);
  if (whole_) {
    table_ = storage_.to(device_, /*non_blocking=*/false, /*copy=*/true);
    return;
  }
  // The cache: each table's most frequent rows, in row order (one pass over the file).
  at::Tensor ranking = npy_tensor(ranking_file_, folder + "/" + kRanking);
  std::vector<at::Tensor> parts;
  int64_t offset = 0;
  for (int64_t n : sizes_) {
    int64_t take = static_cast<int64_t>(std::floor(settings.cache_fraction * n));
    parts.push_back(ranking.narrow(0, offset, take));
    offset += n;
  }
  at::Tensor rows = std::get<0>(at::sort(at::cat(parts)));
  int64_t slots = std::max<int64_t>(rows.numel(), 1);  // one slot at least: a refresh needs one
  if (rows.numel() == 0) rows = at::zeros({1}, at::kLong);
  auto on = at::TensorOptions().device(device_);
  cache_ = storage_.index_select(0, rows).to(device_);
  owner_ = rows.to(device_);
  slot_of_ = at::full({rows_}, -1, on.dtype(at::kInt));
  slot_of_.index_put_({owner_}, at::arange(slots, on.dtype(at::kInt)));
  used_ = at::zeros({slots}, on.dtype(at::kBool));
}

std::string EmbeddingStore::describe() const {
  return std::to_string(tables()) + " tables, " + std::to_string(rows_) + " rows of " +
         std::to_string(dim_) + " (" + std::to_string(storage_.nbytes() >> 20) + " MiB) " +
         (whole_ ? "whole on " + device_.str()
                 : "in host memory, " + std::to_string(cache_.size(0)) + " rows cached on " +
                       device_.str());
}

at::Tensor EmbeddingStore::lookup(const at::Tensor& keys_in) {
  int64_t t = tables();
  if (keys_in.dim() != 1 || keys_in.numel() % t)
    throw std::invalid_argument(std::to_string(keys_in.numel()) +
                                " keys are not a whole number of samples of " +
                                std::to_string(t) + " tables");
  at::Tensor keys = keys_in.to(device_, at::kLong, /*non_blocking=*/true);
  int64_t samples = keys.numel() / t;
  // one reduction; whole tables on a GPU read it back with the run (a small batch is
  // launch-bound: a wait of its own cost 20-30 us), elsewhere at once
  bool deferred = whole_ && device_.is_cuda();
  if (keys.numel()) {
    auto [low, high] = at::aminmax(keys);
    if (!range_.defined())
      range_ = at::empty({2}, at::TensorOptions().dtype(at::kLong).pinned_memory(deferred));
    range_.copy_(at::stack({low, high}), /*non_blocking=*/deferred);
    if (deferred) {
      checked_samples_ = samples;
      keys = keys.clamp(0, rows_ - 1);  // never an index past the table
    } else if (std::string outside = keys_outside(); !outside.empty()) {
      throw std::invalid_argument(outside);
    }
  }
  at::Tensor rows;
  if (whole_) {
    rows = table_.index_select(0, keys);
    for (size_t i = 0; i < lookups_.size(); ++i) {
      lookups_[i] += samples;
      hits_[i] += samples;
    }
  } else {
    rows = lookup_cached(keys);
  }
  return rows.view({samples, t * dim_});
}

std::string EmbeddingStore::keys_outside() const {
  int64_t min = range_[0].item<int64_t>(), max = range_[1].item<int64_t>();
  if (min >= 0 && max < rows_) return "";
  return "keys outside the fused table's " + std::to_string(rows_) + " rows (min " +
         std::to_string(min) + ", max " + std::to_string(max) + ")";
}

void EmbeddingStore::check_keys() {
  int64_t samples = std::exchange(checked_samples_, 0);
  if (samples == 0) return;
  std::string outside = keys_outside();
  if (outside.empty()) return;
  for (size_t i = 0; i < lookups_.size(); ++i) {  // counted before: a failed lookup is none
    lookups_[i] -= samples;
    hits_[i] -= samples;
  }
  throw std::invalid_argument(outside);
}

at::Tensor EmbeddingStore::lookup_cached(const at::Tensor& keys) {
  at::Tensor slots = slot_of_.index_select(0, keys);
  at::Tensor hit = slots.ge(0);
  at::Tensor rows = cache_.index_select(0, slots.clamp_min(0).to(at::kLong));
  used_.index_put_({slots.masked_select(hit).to(at::kLong)}, true);
  count(hit, keys.numel() / tables());
  at::Tensor missed = hit.logical_not().nonzero().squeeze(1);
  if (missed.numel() == 0) return rows;
  auto [unique, inverse] = at::_unique(keys.index_select(0, missed), /*sorted=*/false,
                                       /*return_inverse=*/true);
  at::Tensor fetched = host_rows(unique.to(at::kCPU)).to(device_, /*non_blocking=*/true);
  rows.index_copy_(0, missed, fetched.index_select(0, inverse));
  refresh(unique, fetched);
  return rows;
}

at::Tensor EmbeddingStore::host_rows(const at::Tensor& keys) {
  int64_t n = keys.numel(), row_bytes = dim_ * static_cast<int64_t>(sizeof(float));
  at::Tensor out;
  if (device_.is_cuda()) {
    if (!staging_.defined() || staging_.size(0) < n)
      staging_ = at::empty({std::max(n, staging_.defined() ? 2 * staging_.size(0) : 0), dim_},
                           at::TensorOptions().dtype(at::kFloat).pinned_memory(true));
    out = staging_.narrow(0, 0, n);
  } else {
    out = at::empty({n, dim_}, at::kFloat);
  }
  const int64_t* k = keys.data_ptr<int64_t>();
  const uint8_t* from = static_cast<const uint8_t*>(storage_.data_ptr());
  uint8_t* to = static_cast<uint8_t*>(out.data_ptr());
  at::parallel_for(0, n, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      std::memcpy(to + i * row_bytes, from + k[i] * row_bytes, row_bytes);
  });
  return out;
}

// Missed rows replace rows no lookup used since the hand last passed (a clock's second
// chance), at most an eighth of the cache a batch, so that one batch of rare rows cannot
// flush the hot ones.
void EmbeddingStore::refresh(const at::Tensor& keys, const at::Tensor& rows) {
  int64_t slots = cache_.size(0);
  int64_t wanted = std::min<int64_t>(keys.numel(), std::max<int64_t>(1, slots / 8));
  int64_t window = std::min<int64_t>(slots, 4 * wanted);
  auto on = at::TensorOptions().device(device_).dtype(at::kLong);
  at::Tensor passed = at::arange(hand_, hand_ + window, on).remainder(slots);
  hand_ = (hand_ + window) % slots;
  at::Tensor free = passed.masked_select(used_.index_select(0, passed).logical_not());
  used_.index_fill_(0, passed, false);
  int64_t k = std::min<int64_t>(wanted, free.numel());
  if (k == 0) return;
  at::Tensor victims = free.narrow(0, 0, k);
  slot_of_.index_fill_(0, owner_.index_select(0, victims), -1);
  at::Tensor added = keys.narrow(0, 0, k);
  slot_of_.index_put_({added}, victims.to(at::kInt));
  owner_.index_put_({victims}, added);
  cache_.index_copy_(0, victims, rows.narrow(0, 0, k));
  used_.index_fill_(0, victims, true);
}

void EmbeddingStore::count(const at::Tensor& hit, int64_t samples) {
  at::Tensor per_table = hit.view({samples, tables()}).sum(0).to(at::kCPU);
  const int64_t* h = per_table.data_ptr<int64_t>();
  for (size_t i = 0; i < hits_.size(); ++i) {
    lookups_[i] += samples;
    hits_[i] += h[i];
  }
}

namespace {

double number(const EngineSpec& spec, const std::string& key, double fallback) {
  auto found = spec.parameters.find(key);
  if (found == spec.parameters.end() || found->second.empty()) return fallback;
  char* end = nullptr;
  double value = std::strtod(found->second.c_str(), &end);
  if (*end) throw std::runtime_error("parameter " + key + " '" + found->second + "' is not a number");
  return value;
}

// The ensemble's sparse model: EMB_KEY (INT64 [N], rows of the fused table) and EMB_N_KEY
// (INT32 [1], N) -> the looked-up vectors, FP32 [N / tables, tables * dim].
class Embeddings : public Engine {
 public:
  explicit Embeddings(const EngineSpec& spec)
      : store_(spec.path, spec.device,
               EmbeddingSettings{spec.parameters.count("placement") ? spec.parameters.at("placement")
                                                                    : "fit",
                                 number(spec, "cache_fraction", 0.1),
                                 number(spec, "device_share", 0.5)}) {
    if (spec.inputs.size() != 2 || spec.inputs[0].dtype != at::kLong ||
        spec.inputs[1].dtype != at::kInt)
      throw std::runtime_error("the embeddings take two inputs, the keys (INT64) and their "
                               "count (INT32), in that order");
  }
  bool takes_half() const override { return false; }
  bool host_input(size_t i) const override { return i == 1; }  // the count, read here
  std::optional<TableCounts> table_counts() const override {
    return TableCounts{&store_.lookups(), &store_.hits()};
  }
  std::string describe() const override { return store_.describe(); }
  void check_run() override { store_.check_keys(); }
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) override {
    const at::Tensor& keys = inputs.at(0);
    int64_t count = inputs.at(1).reshape(-1)[0].item<int64_t>();
    if (count != keys.numel())
      throw std::invalid_argument("the key count says " + std::to_string(count) +
                                  " keys where the keys are " + std::to_string(keys.numel()));
    return {store_.lookup(keys.reshape(-1))};
  }

 private:
  EmbeddingStore store_;
};

}  // namespace

std::unique_ptr<Engine> load_embeddings(const EngineSpec& spec) {
  return std::make_unique<Embeddings>(spec);
}

}  // namespace deploybench
