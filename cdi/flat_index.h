// A fixed-capacity hash index from keys to small values, without an
// allocation per entry (open addressing over one slot array). Injection
// de-duplicates a few hundred keys per container; std::unordered_map's node
// per key was a large part of its cost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string_view>
#include <type_traits>
#include <vector>

namespace podshim::cdi {

// The index's hash: strings a word at a time (std::hash's murmur over
// every byte was a tenth of an injection's time), integers and pointers
// mixed so their low bits, which pick the slot, depend on all of them
// (std::hash of a pointer is the pointer, whose low bits are alignment).
// The keys come from root-owned spec files, so no hash flooding defence.
struct FlatHash {
  static uint64_t mix(uint64_t h) {
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
  }
  size_t operator()(std::string_view s) const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = mix(h ^ w);
    }
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    return mix(h ^ w);
  }
  template <typename T>
    requires(std::is_integral_v<T> || std::is_pointer_v<T>)
  size_t operator()(T v) const {
    if constexpr (std::is_pointer_v<T>) return mix(reinterpret_cast<uintptr_t>(v));
    else return mix(static_cast<uint64_t>(v));
  }
};

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
    for (size_t h = FlatHash{}(k) & mask;; h = (h + 1) & mask) {
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
    for (size_t h = FlatHash{}(k) & mask;; h = (h + 1) & mask) {
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
