#include "cgroup/driver.h"

namespace podshim::cgroup {
namespace {

Result<void> write_files(const AttrValuesList& kv, const Driver::WriteFile& write) {
  for (const auto& [file, value] : kv) PODSHIM_TRY(write(file, value));
  return {};
}

class CgroupfsDriver final : public Driver {
 public:
  Result<void> set(const std::string&, const CgroupLocation&, const AttrValuesList& kv,
                   const WriteFile& write) override {
    return write_files(kv, write);
  }
};

class SystemdDriver final : public Driver {
 public:
  explicit SystemdDriver(std::function<Result<UnitManager*>()> units) : units_(std::move(units)) {}
  Result<void> set(const std::string& id, const CgroupLocation& loc, const AttrValuesList& kv,
                   const WriteFile& write) override {
    auto props = properties(id, kv);
    if (!props) return Unexpected(props.error());
    if (!props->empty()) {
      auto um = units_();
      if (!um) return Unexpected(um.error());
      auto r = (*um)->set_unit_properties(loc.unit, *props);
      if (!r) return wrap(r, fmt::format("'{}'", id));
    }
    return write_files(kv, write);
  }

  // Properties first, files once systemd has answered: the same order as
  // set(), the wait on the loop.
  void set_async(const std::string& id, const CgroupLocation& loc, const AttrValuesList& kv, WriteFile write,
                 Done done) override {
    auto props = properties(id, kv);
    if (!props) return done(Unexpected(props.error()));
    if (props->empty()) return done(write_files(kv, write));
    auto um = units_();
    if (!um) return done(Unexpected(um.error()));
    (*um)->set_unit_properties_async(
        loc.unit, *props, [id, kv, write = std::move(write), done = std::move(done)](Result<void> r) {
          if (!r) return done(wrap(r, fmt::format("'{}'", id)));
          done(write_files(kv, write));
        });
  }

 private:
  static Result<std::vector<UnitProperty>> properties(const std::string& id, const AttrValuesList& kv) {
    std::vector<UnitProperty> props;
    for (const auto& [file, value] : kv) {
      auto p = properties_for_attr(file, value);
      if (!p) return wrap(p, fmt::format("'{}'", id));
      props.insert(props.end(), p->begin(), p->end());
    }
    return props;
  }

  std::function<Result<UnitManager*>()> units_;
};

}  // namespace

std::unique_ptr<Driver> make_cgroupfs_driver() { return std::make_unique<CgroupfsDriver>(); }
std::unique_ptr<Driver> make_systemd_driver(std::function<Result<UnitManager*>()> units) {
  return std::make_unique<SystemdDriver>(std::move(units));
}

}  // namespace podshim::cgroup
