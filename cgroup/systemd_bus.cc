// The only file in cgroup/ that talks sd-bus.
#include <systemd/sd-bus.h>

#include <mutex>

#include "cgroup/unit_manager.h"

namespace podshim::cgroup {
namespace {

class SdBusUnitManager final : public UnitManager {
 public:
  explicit SdBusUnitManager(std::chrono::microseconds timeout) : timeout_(timeout) {}
  ~SdBusUnitManager() override {
    if (bus_) sd_bus_flush_close_unref(bus_);
  }

  Result<void> set_unit_properties(const std::string& unit,
                                   const std::vector<UnitProperty>& props) override {
    std::lock_guard<std::mutex> lock(mu_);  // an sd_bus is not thread-safe
    if (!bus_) {
      int r = sd_bus_open_system(&bus_);
      if (r < 0) {
        bus_ = nullptr;
        return fail_code(-r, "connecting to the system bus");
      }
    }
    sd_bus_message* m = nullptr;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    auto cleanup = [&] {
      sd_bus_message_unref(m);
      sd_bus_message_unref(reply);
      sd_bus_error_free(&error);
    };
    int r = sd_bus_message_new_method_call(bus_, &m, "org.freedesktop.systemd1",
                                           "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "SetUnitProperties");
    if (r >= 0) r = sd_bus_message_append(m, "sb", unit.c_str(), 1);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "(sv)");
    for (const auto& p : props) {
      if (r < 0) break;
      r = sd_bus_message_append(m, "(sv)", p.name.c_str(), "t", p.value);
    }
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r < 0) {
      cleanup();
      return fail_code(-r, "building SetUnitProperties for '{}'", unit);
    }
    r = sd_bus_call(bus_, m, static_cast<uint64_t>(timeout_.count()), &error, &reply);
    if (r < 0) {
      auto e = fail(-r, "SetUnitProperties on '{}': {}", unit,
                    error.message ? error.message : errno_string(-r));
      if (r == -ETIMEDOUT) {
        e = Unexpected(Error{ETIMEDOUT,
                             fmt::format("SetUnitProperties on '{}': no reply from systemd within {} ms", unit,
                                         timeout_.count() / 1000),
                             ErrorKind::Timeout});
      }
      cleanup();
      return e;
    }
    cleanup();
    return {};
  }

 private:
  std::mutex mu_;
  sd_bus* bus_ = nullptr;
  std::chrono::microseconds timeout_;
};

}  // namespace

std::shared_ptr<UnitManager> make_sdbus_unit_manager(std::chrono::microseconds call_timeout) {
  return std::make_shared<SdBusUnitManager>(call_timeout);
}
std::shared_ptr<UnitManager> make_sdbus_unit_manager() { return make_sdbus_unit_manager(kDefaultUnitCallTimeout); }

}  // namespace podshim::cgroup
