// A directory of prepared weight images that several engine processes map
// read-only (MAP_SHARED) instead of each holding a private copy: instances of
// one model on the same NUMA nodes then share one set of physical pages.
//
// A store file is named after a hash of its key (every input that changes its
// bytes, as text) and holds a header (magic, format, sizes, the key itself, a
// "complete" word written last) and then the payload, page aligned. A file
// that fails any check is never used: it is rebuilt. Building happens under
// flock(KEY.lock) into KEY.tmp, renamed into place when complete, so a
// process that waited on the lock finds the finished file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/runtime/weight_memory.hpp"

namespace epyctune::engine::runtime {

// Bad store directory or a store file that cannot be replaced; the message
// names the path and the fix.
class SharedWeightsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// FNV-1a, 64 bits: change detection for keys and GGUF headers, not security
// (the store directory must be the caller's own).
uint64_t hash64(std::span<const uint8_t> bytes, uint64_t seed = 0xcbf29ce484222325ull);
uint64_t hash64(std::string_view text, uint64_t seed = 0xcbf29ce484222325ull);

// What the load did with the store, for reports.
struct SharedWeightsInfo {
  bool shared = false;  // weights mapped read-only from `file`
  std::string file;
  uint64_t inode = 0;
  bool built = false;      // this process wrote the file (else it was there)
  std::string fs;          // "tmpfs", "hugetlbfs" or "other"
  size_t page_size = 0;    // the store's page: hugetlbfs's huge page, else 4096
  double lock_wait_s = 0;  // time spent waiting for another builder
  std::string note;        // files ignored and rebuilt, placement refused
};

struct SharedWeightsRequest {
  std::filesystem::path dir;
  std::string key;        // canonical text; at most kMaxKeyBytes
  size_t data_bytes = 0;  // the payload
  // Where the header pages go (the payload's placement is place()'s job).
  NumaPolicy policy = NumaPolicy::none;
  std::vector<int> nodes;
  // A build calls place() on the fresh, untouched payload (page aligned,
  // `page` bytes a page) to mbind its ranges, reserves the file's space (so
  // tmpfs allocates by that policy), then fill() to write it.
  std::function<void(uint8_t* data, size_t page)> place;
  std::function<void(uint8_t* data)> fill;
};

struct SharedWeights {
  WeightMemory memory;            // the whole file, PROT_READ, MAP_SHARED
  const uint8_t* data = nullptr;  // the payload inside it
  SharedWeightsInfo info;
};

inline constexpr size_t kMaxKeyBytes = 16 << 10;

// The store file for `key` in `dir`, built first when absent or unusable.
// Throws SharedWeightsError for a directory that is missing, not a directory,
// not owned by this user or root, or world-writable without the sticky bit;
// for a file in the way that this user cannot replace; and when building fails
// (no space, no huge pages).
SharedWeights open_shared_weights(const SharedWeightsRequest& req);

// The file name the key maps to (also KEY.lock, KEY.tmp beside it).
std::string shared_weights_name(std::string_view key);

}  // namespace epyctune::engine::runtime
