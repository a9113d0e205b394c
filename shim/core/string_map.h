#pragma once

// StringMap: the annotations and labels of a pod or container, kept in one
// allocation.
//
// A std::map<std::string, std::string> costs a 96-byte tree node per entry
// plus a heap block for every key or value longer than 15 bytes, and the keys
// of Kubernetes annotations ("io.kubernetes.cri.sandbox-id", ...) almost all
// are. With the seven annotations the CRI plugins put on every container
// that was about 1 KB per container, a third of podshimd's model on a
// 3000-container node, and copying a container (the store does, for every
// update) copied seven nodes and fourteen strings. Here the entries sit
// sorted by key in one buffer, each as [u32 key length][u32 value length]
// [key][value]; lookups are a linear scan, which for the few entries an
// object has is as fast as a tree walk. Keys and values may hold any bytes,
// NUL included (both come from the runtime, or from a client's JSON).

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace podshim::core {

class StringMap {
 public:
  using value_type = std::pair<std::string_view, std::string_view>;

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = StringMap::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = value_type;

    const_iterator() = default;
    value_type operator*() const {
      uint32_t kl, vl;
      std::memcpy(&kl, p_, 4);
      std::memcpy(&vl, p_ + 4, 4);
      return {std::string_view(p_ + 8, kl), std::string_view(p_ + 8 + kl, vl)};
    }
    struct Arrow {
      value_type v;
      const value_type* operator->() const { return &v; }
    };
    Arrow operator->() const { return {**this}; }
    const_iterator& operator++() {
      p_ += entry_size(p_);
      return *this;
    }
    const_iterator operator++(int) {
      auto t = *this;
      ++*this;
      return t;
    }
    bool operator==(const const_iterator& o) const { return p_ == o.p_; }

   private:
    friend class StringMap;
    explicit const_iterator(const char* p) : p_(p) {}
    const char* p_ = nullptr;
  };
  using iterator = const_iterator;

  StringMap() = default;
  StringMap(std::initializer_list<std::pair<std::string_view, std::string_view>> l) {
    assign(l.begin(), l.end());
  }
  // From any range of pairs whose members convert to std::string_view
  // (std::map, protobuf Map, vectors of pairs). As with std::map's range
  // constructor, the first of duplicate keys is kept.
  template <class It>
  StringMap(It first, It last) {
    assign(first, last);
  }

  template <class It>
  void assign(It first, It last) {
    std::vector<value_type> v;
    for (; first != last; ++first) v.emplace_back(std::string_view(first->first), std::string_view(first->second));
    assign_sorted(std::move(v));
  }

  const_iterator begin() const { return const_iterator(buf_.data()); }
  const_iterator end() const { return const_iterator(buf_.data() + buf_.size()); }
  bool empty() const { return buf_.empty(); }
  size_t size() const;
  void clear() { buf_.clear(); }
  // Drops the entries and their buffer, and makes room for `bytes` (see
  // bytes_for()): a map filled from a wire map gets no growth slack.
  void reset(size_t bytes) {
    std::string().swap(buf_);
    buf_.reserve(bytes);
  }
  // What an entry of key `k` and value `v` takes in the buffer.
  static size_t bytes_for(std::string_view k, std::string_view v) { return 8 + k.size() + v.size(); }

  const_iterator find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != end(); }
  std::optional<std::string_view> get(std::string_view key) const {
    auto it = find(key);
    if (it == end()) return std::nullopt;
    return (*it).second;
  }
  // Inserts, or replaces the value of, `key`.
  void set(std::string_view key, std::string_view value);
  // std::map's spelling of set().
  void insert_or_assign(std::string_view key, std::string_view value) { set(key, value); }
  // Returns false when there was no such key.
  bool erase(std::string_view key);

  // The bytes the entries take (their keys, values and 8 bytes each).
  size_t bytes() const { return buf_.size(); }

  bool operator==(const StringMap& o) const { return buf_ == o.buf_; }

 private:
  static size_t entry_size(const char* p) {
    uint32_t kl, vl;
    std::memcpy(&kl, p, 4);
    std::memcpy(&vl, p + 4, 4);
    return 8 + size_t{kl} + vl;
  }
  static void put(std::string& out, std::string_view k, std::string_view v);
  // Where `key` is or would be inserted; *found says which.
  size_t lower_bound(std::string_view key, bool* found) const;
  void assign_sorted(std::vector<value_type> v);

  std::string buf_;
};

}  // namespace podshim::core
