// An instance's gather and scatter of every data type it serves (requests of several batch
// sizes, an input split over buffers, each response holding its own rows, statistics in
// order, the batch's the same, none left at 0); requests of a wrong type or shape failing
// alone, and one of a bad value in a batch (found after the run) failing alone, its error
// cut to the client's.
#include <algorithm>
#include <stdexcept>

#include "unit.h"

namespace deploybench::unit {

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

}  // namespace deploybench::unit
