#include "shim/core/string_map.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace podshim::core {

namespace {

uint32_t len32(std::string_view s) {
  // Keys and values come from bounded messages (the NRI transport's and the
  // status API's size limits are far below 4 GiB).
  if (s.size() > std::numeric_limits<uint32_t>::max()) throw std::length_error("StringMap entry over 4 GiB");
  return static_cast<uint32_t>(s.size());
}

}  // namespace

void StringMap::put(std::string& out, std::string_view k, std::string_view v) {
  const uint32_t kl = len32(k), vl = len32(v);
  char hdr[8];
  std::memcpy(hdr, &kl, 4);
  std::memcpy(hdr + 4, &vl, 4);
  out.append(hdr, 8);
  out.append(k);
  out.append(v);
}

size_t StringMap::size() const {
  size_t n = 0;
  for (auto it = begin(); it != end(); ++it) ++n;
  return n;
}

size_t StringMap::lower_bound(std::string_view key, bool* found) const {
  size_t off = 0;
  while (off < buf_.size()) {
    const char* p = buf_.data() + off;
    uint32_t kl;
    std::memcpy(&kl, p, 4);
    const int c = std::string_view(p + 8, kl).compare(key);
    if (c >= 0) {
      *found = c == 0;
      return off;
    }
    off += entry_size(p);
  }
  *found = false;
  return off;
}

StringMap::const_iterator StringMap::find(std::string_view key) const {
  bool found = false;
  const size_t off = lower_bound(key, &found);
  return found ? const_iterator(buf_.data() + off) : end();
}

void StringMap::set(std::string_view key, std::string_view value) {
  // A key or value viewing this map's own buffer (m.set(k, *m.get(k2)))
  // would move under the insert below: copy it out first.
  auto inside = [&](std::string_view v) {
    return !v.empty() && v.data() >= buf_.data() && v.data() < buf_.data() + buf_.size();
  };
  if (inside(key) || inside(value)) {
    const std::string k(key), v(value);
    return set(k, v);
  }
  bool found = false;
  const size_t off = lower_bound(key, &found);
  // In place: no temporary entry (this runs for every annotation and label
  // of every container a Synchronize brings).
  const size_t need = 8 + key.size() + value.size();
  const size_t old = found ? entry_size(buf_.data() + off) : 0;
  if (need > old)
    buf_.insert(off + old, need - old, '\0');
  else if (need < old)
    buf_.erase(off + need, old - need);
  const uint32_t kl = len32(key), vl = len32(value);
  char* p = buf_.data() + off;
  std::memcpy(p, &kl, 4);
  std::memcpy(p + 4, &vl, 4);
  // std::copy, not memcpy: an empty view from the wire may have a null
  // data(), which memcpy must not be given even for 0 bytes (UBSan, found
  // by nri_message_fuzz).
  std::copy(key.begin(), key.end(), p + 8);
  std::copy(value.begin(), value.end(), p + 8 + key.size());
}

bool StringMap::erase(std::string_view key) {
  bool found = false;
  const size_t off = lower_bound(key, &found);
  if (!found) return false;
  buf_.erase(off, entry_size(buf_.data() + off));
  return true;
}

void StringMap::assign_sorted(std::vector<value_type> v) {
  // stable: of equal keys the first given stays first, and is kept.
  std::stable_sort(v.begin(), v.end(), [](const value_type& a, const value_type& b) { return a.first < b.first; });
  size_t total = 0;
  for (const auto& [k, val] : v) total += 8 + k.size() + val.size();
  std::string out;
  out.reserve(total);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0 && v[i].first == v[i - 1].first) continue;
    put(out, v[i].first, v[i].second);
  }
  // The views may point into buf_ itself (m.assign(m.begin(), m.end())):
  // build aside, then swap.
  buf_.swap(out);
  buf_.shrink_to_fit();
}

}  // namespace podshim::core
