#include "region_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

namespace deploybench {
namespace {

constexpr int kWatches = 256;  // instances of a server at once
constexpr int kLostPages = 4096;
std::atomic<RegionWatch*> watches[kWatches];
std::atomic<uintptr_t> lost_pages[kLostPages];
std::atomic<int> lost_count{0};
uintptr_t page_size = 4096;
struct sigaction previous;
// The page of zeros a lost page becomes: a memory file's, so that /proc/self/maps tells it
// from any other mapping the address may later hold.
int zeros_fd = -1;
unsigned long zeros_inode = 0;

void on_sigbus(int signal, siginfo_t* info, void* context) {
  uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  bool ours = false;
  for (auto& slot : watches) {
    RegionWatch* watch = slot.load();
    if (watch != nullptr && watch->claim(address)) ours = true;
  }
  int index = ours ? lost_count.fetch_add(1) : kLostPages;
  uintptr_t page = address & ~(page_size - 1);
  // a page of zeros where the file has none: the interrupted access completes
  if (index < kLostPages && zeros_fd >= 0 &&
      mmap(reinterpret_cast<void*>(page), page_size, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_FIXED, zeros_fd, 0) != MAP_FAILED) {
    lost_pages[index].store(page);
    return;
  }
  // not ours (or no room to note it): what was there before, the default ending the server
  if (previous.sa_flags & SA_SIGINFO && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(signal, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(signal);
  } else {
    sigaction(SIGBUS, &previous, nullptr);  // the access faults again, and the default acts
  }
}

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    zeros_fd = memfd_create("deploybench-lost-page", MFD_CLOEXEC);
    struct stat st;
    if (zeros_fd >= 0 && ftruncate(zeros_fd, static_cast<off_t>(page_size)) == 0 &&
        fstat(zeros_fd, &st) == 0) {
      zeros_inode = st.st_ino;
    } else {
      std::perror("deploybench: no page to stand in for a truncated region's (memfd_create)");
      zeros_fd = -1;
    }
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous);
  });
}

// Whether `page` is still the page of zeros put there (not where the address was mapped anew
// since: a region registered again, other memory): /proc/self/maps, on this rare path.
bool still_lost(uintptr_t page) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string span, perms, offset, dev;
    unsigned long inode = 0;
    fields >> span >> perms >> offset >> dev >> inode;
    uintptr_t begin = std::stoull(span.substr(0, span.find('-')), nullptr, 16);
    uintptr_t end = std::stoull(span.substr(span.find('-') + 1), nullptr, 16);
    if (page >= begin && page < end) return inode == zeros_inode;
  }
  return false;
}

}  // namespace

RegionWatch::RegionWatch() {
  install();
  for (int i = 0; i < kWatches && slot_ < 0; ++i) {
    RegionWatch* empty = nullptr;
    if (watches[i].compare_exchange_strong(empty, this)) slot_ = i;
  }
}

RegionWatch::~RegionWatch() {
  if (slot_ >= 0) watches[slot_].store(nullptr);
}

void RegionWatch::watch(const std::vector<Range>& ranges) {
  count_.store(0);
  ranges_.store(ranges.data());
  count_.store(ranges.size());
}

bool RegionWatch::claim(uintptr_t address) {
  size_t count = count_.load();
  const Range* ranges = ranges_.load();
  for (size_t i = 0; ranges != nullptr && i < count; ++i)
    if (address >= ranges[i].begin && address < ranges[i].end) {
      faulted_.store(true);
      return true;
    }
  return false;
}

bool lost(const void* data, size_t bytes) {
  int count = std::min(lost_count.load(), kLostPages);
  if (count == 0 || bytes == 0) return false;  // the good path: one load
  uintptr_t begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
  bool found = false;
  for (int i = 0; i < count; ++i) {
    uintptr_t page = lost_pages[i].load();
    if (page == 0 || page + page_size <= begin || page >= end) continue;
    if (still_lost(page))
      found = true;
    else
      lost_pages[i].store(0);
  }
  return found;
}

}  // namespace deploybench
