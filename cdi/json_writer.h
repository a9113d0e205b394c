// A JSON text writer into one std::string, producing exactly what
// nlohmann::json::dump(indent) produces for the same document (indent -1:
// compact; >= 0: that many spaces per level, "key": value), so a caller can
// write values it holds in its own structs next to parts of an
// nlohmann::json tree without building JSON nodes for them. Keys are written
// in the order given: callers that mirror an nlohmann object (a std::map)
// write them sorted.
//
// Strings are escaped as nlohmann's serializer does with ensure_ascii off
// (", \, \b \f \n \r \t, other bytes below 0x20 as \u00xx, everything else
// verbatim); a string that is not well-formed UTF-8, where dump() would throw
// (type_error 316), makes ok() false instead and names the first such string.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace podshim::cdi {

class JsonWriter {
 public:
  // `size_hint`: the bytes to reserve up front (the output grows past it).
  explicit JsonWriter(int indent, size_t size_hint = 4096);
  // The text written so far; the writer is empty afterwards.
  std::string take();

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  // Starts a member of the current object; its value comes next.
  void key(std::string_view k);
  // The same for a key known to need no escaping (plain ASCII): the
  // writer's own field names.
  void plain_key(std::string_view k);
  // Starts an element of the current array; its value comes next.
  void element() { separate(); }

  void string(std::string_view s);
  void integer(int64_t v);
  void unsigned_integer(uint64_t v);
  void boolean(bool v) { raw(v ? std::string_view("true") : std::string_view("false")); }
  // Any nlohmann value, written the way its dump() writes it at this depth.
  void value(const nlohmann::json& j);

  // Consulted by value() for every array and object of an nlohmann tree
  // before it is written: returning true means it wrote that value itself
  // (a caller splicing its own entries into a config's lists).
  void set_override(std::function<bool(const nlohmann::json&, JsonWriter&)> f) { override_ = std::move(f); }

  bool ok() const { return bad_utf8_.empty(); }
  // The first string that was not well-formed UTF-8 (empty when ok()).
  const std::string& bad_string() const { return bad_utf8_; }

 private:
  void open(char c);
  void close(char c);
  void separate();
  void newline_indent(size_t depth);
  // Room for n more bytes at the end; returns where they go.
  char* room(size_t n) {
    if (len_ + n > out_.size()) grow(n);
    return out_.data() + len_;
  }
  void grow(size_t n);
  void raw(std::string_view s) {
    char* p = room(s.size());
    std::memcpy(p, s.data(), s.size());
    len_ += s.size();
  }
  void raw(char c) {
    *room(1) = c;
    len_++;
  }

  // The output, sized ahead of what is written: len_ bytes are written.
  std::string out_;
  size_t len_ = 0;
  int step_;
  // Per open container: whether it has an element yet.
  std::vector<char> nonempty_;
  std::string bad_utf8_;
  std::function<bool(const nlohmann::json&, JsonWriter&)> override_;
};

}  // namespace podshim::cdi
