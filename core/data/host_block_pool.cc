#include "core/data/host_block_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <iterator>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace tomo::core {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t RoundedToHugePages(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

size_t DefaultKeptBytesLimit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return size_t{1} << 30;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size) / 8;
}

struct Block {
  size_t bytes = 0;
  int64_t uses = 0;
  std::shared_ptr<void> attachment;
  bool kept = false;  // in the pool, not in use
};

}  // namespace

struct HostBlockPool::State {
  mutable std::mutex mu;
  std::map<uintptr_t, Block> blocks;  // every block, in use or kept, by start address
  std::list<uintptr_t> kept;          // the kept ones, longest kept first
  size_t kept_bytes = 0;
  size_t limit = DefaultKeptBytesLimit();

  // Takes the kept blocks longest kept out of the pool until `bytes` more fit under the
  // limit; returns them, for the caller to free outside the lock.
  std::vector<std::pair<void*, std::shared_ptr<void>>> EvictFor(size_t bytes) {
    std::vector<std::pair<void*, std::shared_ptr<void>>> evicted;
    while (!kept.empty() && kept_bytes + bytes > limit) {
      const uintptr_t start = kept.front();
      kept.pop_front();
      auto it = blocks.find(start);
      kept_bytes -= it->second.bytes;
      evicted.emplace_back(reinterpret_cast<void*>(start), std::move(it->second.attachment));
      blocks.erase(it);
    }
    return evicted;
  }
};

namespace {

// The attachment first (a registration must end before the memory goes back).
void FreeBlocks(std::vector<std::pair<void*, std::shared_ptr<void>>> blocks) {
  for (auto& [start, attachment] : blocks) {
    attachment.reset();
    std::free(start);
  }
}

}  // namespace

HostBlockPool::HostBlockPool() : state_(std::make_unique<State>()) {}
HostBlockPool::~HostBlockPool() = default;

HostBlockPool& HostBlockPool::Get() {
  // Never destroyed: arrays with static storage may give blocks back during exit.
  static HostBlockPool* pool = new HostBlockPool();
  return *pool;
}

void* HostBlockPool::Take(size_t bytes) {
  const size_t rounded = RoundedToHugePages(bytes);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto chosen = state_->kept.end();
    for (auto it = state_->kept.begin(); it != state_->kept.end(); ++it) {
      const Block& block = state_->blocks.at(*it);
      if (block.bytes != rounded) continue;
      chosen = it;
      if (block.attachment != nullptr) break;  // page-locked: the most useful
    }
    if (chosen != state_->kept.end()) {
      const uintptr_t start = *chosen;
      state_->kept.erase(chosen);
      Block& block = state_->blocks.at(start);
      block.kept = false;
      ++block.uses;
      state_->kept_bytes -= block.bytes;
      return reinterpret_cast<void*>(start);
    }
  }
  void* start = std::aligned_alloc(kHugePage, rounded);
  if (start == nullptr) {
    // The system is short: what the pool keeps goes back before the request fails.
    Clear();
    start = std::aligned_alloc(kHugePage, rounded);
    if (start == nullptr) throw std::bad_alloc();
  }
  // A hint: without transparent huge pages (or with them off) this fails and nothing
  // changes.
  madvise(start, rounded, MADV_HUGEPAGE);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->blocks[reinterpret_cast<uintptr_t>(start)] = Block{rounded, 1, nullptr, false};
  return start;
}

void HostBlockPool::GiveBack(void* start, size_t bytes) noexcept {
  const size_t rounded = RoundedToHugePages(bytes);
  std::vector<std::pair<void*, std::shared_ptr<void>>> to_free;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->blocks.find(reinterpret_cast<uintptr_t>(start));
    if (it == state_->blocks.end()) {
      to_free.emplace_back(start, nullptr);  // not ours (cannot happen through Array3D)
    } else if (rounded > state_->limit) {
      to_free.emplace_back(start, std::move(it->second.attachment));
      state_->blocks.erase(it);
    } else {
      to_free = state_->EvictFor(rounded);
      it->second.kept = true;
      state_->kept.push_back(it->first);
      state_->kept_bytes += it->second.bytes;
    }
  }
  FreeBlocks(std::move(to_free));
}

std::optional<HostBlock> HostBlockPool::FindInUse(const void* address) const {
  const uintptr_t at = reinterpret_cast<uintptr_t>(address);
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->blocks.upper_bound(at);
  if (it == state_->blocks.begin()) return std::nullopt;
  it = std::prev(it);
  const Block& block = it->second;
  if (block.kept || at >= it->first + block.bytes) return std::nullopt;
  return HostBlock{reinterpret_cast<void*>(it->first), block.bytes, block.uses,
                   block.attachment != nullptr};
}

bool HostBlockPool::Attach(void* start, std::shared_ptr<void> attachment) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->blocks.find(reinterpret_cast<uintptr_t>(start));
  if (it == state_->blocks.end() || it->second.kept || it->second.attachment != nullptr) {
    return false;
  }
  it->second.attachment = std::move(attachment);
  return true;
}

void HostBlockPool::SetKeptBytesLimit(size_t bytes) {
  std::vector<std::pair<void*, std::shared_ptr<void>>> to_free;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->limit = bytes;
    to_free = state_->EvictFor(0);
  }
  FreeBlocks(std::move(to_free));
}

size_t HostBlockPool::kept_bytes_limit() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->limit;
}

size_t HostBlockPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->kept_bytes;
}

void HostBlockPool::Clear() {
  std::vector<std::pair<void*, std::shared_ptr<void>>> to_free;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    const size_t limit = state_->limit;
    state_->limit = 0;
    to_free = state_->EvictFor(0);
    state_->limit = limit;
  }
  FreeBlocks(std::move(to_free));
}

}  // namespace tomo::core
