// A fixed-capacity hash index from keys to small values, without an
// allocation per entry (open addressing over one slot array). Injection
// de-duplicates a few hundred keys per container; std::unordered_map's node
// per key was a large part of its cost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace podshim::cdi {

template <typename Key, typename Value = size_t>
class FlatIndex {
 public:
  // Room for at most `max_keys` distinct keys; more is a programming error.
  explicit FlatIndex(size_t max_keys) {
    size_t cap = 8;
    while (cap < 2 * max_keys) cap <<= 1;
    slots_.assign(cap, kEmpty);
    keys_.reserve(max_keys);
    values_.reserve(max_keys);
  }

  // The value for `k`, inserting `v` first when `k` is new (*fresh = true).
  Value& find_or_add(const Key& k, Value v, bool* fresh) {
    size_t mask = slots_.size() - 1;
    for (size_t h = std::hash<Key>{}(k) & mask;; h = (h + 1) & mask) {
      uint32_t s = slots_[h];
      if (s == kEmpty) {
        slots_[h] = static_cast<uint32_t>(keys_.size());
        keys_.push_back(k);
        values_.push_back(v);
        *fresh = true;
        return values_.back();
      }
      if (keys_[s] == k) {
        *fresh = false;
        return values_[s];
      }
    }
  }
  // Inserts `k` if new; returns whether it was.
  bool insert(const Key& k) {
    bool fresh;
    find_or_add(k, Value{}, &fresh);
    return fresh;
  }
  const Value* find(const Key& k) const {
    size_t mask = slots_.size() - 1;
    for (size_t h = std::hash<Key>{}(k) & mask;; h = (h + 1) & mask) {
      uint32_t s = slots_[h];
      if (s == kEmpty) return nullptr;
      if (keys_[s] == k) return &values_[s];
    }
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  std::vector<uint32_t> slots_;
  std::vector<Key> keys_;
  std::vector<Value> values_;
};

}  // namespace podshim::cdi
