#include "tests/shim/nri/capture.h"

#include <zlib.h>

#include <map>
#include <memory>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/util/message_differencer.h>
#include <nlohmann/json.hpp>

#include "base/str.h"

namespace podshim::nri::test {

std::string capture_dir() { return PODSHIM_NRI_CAPTURE_DIR; }

namespace {

Result<std::string> read_maybe_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files as they are
  if (!f) return fail_errno("opening capture {}", path);
  std::string out;
  char buf[65536];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  const bool bad = n < 0;
  gzclose(f);
  if (bad) return fail(EIO, "reading capture {}", path);
  return out;
}

Result<std::string> unhex(std::string_view hex) {
  if (hex.size() % 2) return fail(EINVAL, "odd-length hex");
  std::string out(hex.size() / 2, '\0');
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nib(hex[2 * i]), lo = nib(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return fail(EINVAL, "bad hex digit");
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

}  // namespace

Result<std::vector<CaptureFrame>> load_capture(const std::string& file) {
  auto text = read_maybe_gz(capture_dir() + "/" + file);
  if (!text) return wrap(text, "loading capture");
  std::vector<CaptureFrame> frames;
  for (auto line : str::split(*text, '\n')) {
    if (str::trim(line).empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) return fail(EINVAL, "{}: invalid JSON line", file);
    CaptureFrame f;
    f.seq = j.value("seq", 0);
    f.from_runtime = j.value("dir", "") == "runtime->plugin";
    f.conn = j.value("conn", 0u);
    auto p = unhex(j.value("payload_hex", ""));
    if (!p) return wrap(p, file);
    f.payload = std::move(*p);
    if (f.payload.size() != j.value("len", size_t{0})) {
      return fail(EINVAL, "{}: frame {} length mismatch", file, f.seq);
    }
    frames.push_back(std::move(f));
  }
  return frames;
}

Result<std::vector<CaptureMessage>> reassemble(const std::vector<CaptureFrame>& frames) {
  std::vector<CaptureMessage> out;
  std::map<std::pair<bool, uint32_t>, std::unique_ptr<TtrpcDecoder>> decoders;
  for (const auto& f : frames) {
    auto& d = decoders[{f.from_runtime, f.conn}];
    if (!d) d = std::make_unique<TtrpcDecoder>(kDefaultMaxRecvMessage);
    auto r = d->feed(f.payload, [&](TtrpcMessage&& m) -> Result<void> {
      out.push_back({f.from_runtime, f.conn, m.header, std::move(m.body)});
      return {};
    });
    if (!r) return wrap(r, fmt::format("frame {}", f.seq));
  }
  return out;
}

bool fully_known(const google::protobuf::Message& m, std::string* path) {
  const auto* refl = m.GetReflection();
  if (!refl->GetUnknownFields(m).empty()) {
    *path = m.GetDescriptor()->full_name();
    return false;
  }
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  refl->ListFields(m, &fields);
  for (const auto* fd : fields) {
    if (fd->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (fd->is_repeated()) {
      for (int i = 0; i < refl->FieldSize(m, fd); ++i) {
        if (!fully_known(refl->GetRepeatedMessage(m, fd, i), path)) {
          *path = fd->name() + "." + *path;
          return false;
        }
      }
    } else if (!fully_known(refl->GetMessage(m, fd), path)) {
      *path = fd->name() + "." + *path;
      return false;
    }
  }
  return true;
}

const google::protobuf::Descriptor* reflect_descriptor(std::string_view nri_full_name) {
  return google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(
      std::string(kReflectPackagePrefix) + std::string(nri_full_name));
}

std::unique_ptr<google::protobuf::Message> reflect_message(const google::protobuf::Descriptor* d) {
  return std::unique_ptr<google::protobuf::Message>(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(d)->New());
}

bool same_message(const google::protobuf::MessageLite& a, const google::protobuf::MessageLite& b, std::string* diff) {
  if (a.GetTypeName() != b.GetTypeName()) {
    *diff = a.GetTypeName() + " vs " + b.GetTypeName();
    return false;
  }
  const auto* d = reflect_descriptor(a.GetTypeName());
  if (!d) {
    *diff = "no reflection copy of " + a.GetTypeName();
    return false;
  }
  auto ra = reflect_message(d), rb = reflect_message(d);
  if (!ra->ParseFromString(a.SerializeAsString()) || !rb->ParseFromString(b.SerializeAsString())) {
    *diff = "reparse failed";
    return false;
  }
  google::protobuf::util::MessageDifferencer md;
  md.ReportDifferencesToString(diff);
  return md.Compare(*ra, *rb);
}

}  // namespace podshim::nri::test
