// The only file in cgroup/ that talks sd-bus.
//
// Two connections, each made on first use: one for blocking calls (any
// thread, under a mutex: an sd_bus is not thread-safe) and one attached to
// the daemon's sd-event loop for asynchronous calls, used only from the
// loop's thread. An asynchronous call's reply (or sd-bus's synthesized
// timeout reply, sd_bus_call_async's usec) is dispatched by the loop, so a
// slow systemd never holds the loop.
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <mutex>

#include "cgroup/unit_manager.h"

namespace podshim::cgroup {
namespace {

using Clock = std::chrono::steady_clock;

class SdBusUnitManager final : public UnitManager {
 public:
  explicit SdBusUnitManager(SdBusOptions o) : o_(std::move(o)) {}
  ~SdBusUnitManager() override {
    // Closing frees the pending calls' slots (their destroy callbacks free
    // the state; their `done` is not called: the engine is going away).
    if (sync_bus_) sd_bus_flush_close_unref(sync_bus_);
    if (async_bus_) sd_bus_flush_close_unref(async_bus_);
  }

  Result<void> set_unit_properties(const std::string& unit,
                                   const std::vector<UnitProperty>& props) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (sync_bus_ && !sd_bus_is_open(sync_bus_)) {
      sd_bus_flush_close_unref(sync_bus_);  // systemd restarted or the bus went away: reconnect
      sync_bus_ = nullptr;
    }
    if (!sync_bus_) {
      auto b = connect(nullptr);
      if (!b) return Unexpected(b.error());
      sync_bus_ = *b;
    }
    auto m = build(sync_bus_, unit, props);
    if (!m) return Unexpected(m.error());
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    int r = sd_bus_call(sync_bus_, *m, timeout_usec(), &error, &reply);
    Result<void> out;
    if (r < 0) out = call_error(unit, -r, error.message);
    sd_bus_message_unref(*m);
    sd_bus_message_unref(reply);
    sd_bus_error_free(&error);
    return out;
  }

  void set_unit_properties_async(const std::string& unit, const std::vector<UnitProperty>& props,
                                 Done done) override {
    if (!o_.event) return done(set_unit_properties(unit, props));
    if (async_bus_ && !sd_bus_is_open(async_bus_)) {
      sd_bus_flush_close_unref(async_bus_);
      async_bus_ = nullptr;
    }
    if (!async_bus_) {
      auto b = connect(o_.event);
      if (!b) return done(Unexpected(b.error()));
      async_bus_ = *b;
    }
    auto m = build(async_bus_, unit, props);
    if (!m) return done(Unexpected(m.error()));
    auto* p = new Pending{this, unit, std::move(done), Clock::now()};
    sd_bus_slot* slot = nullptr;
    int r = sd_bus_call_async(async_bus_, &slot, *m, &SdBusUnitManager::on_reply, p, timeout_usec());
    sd_bus_message_unref(*m);
    if (r < 0) {
      std::unique_ptr<Pending> own(p);
      return own->done(fail_code(-r, "sending SetUnitProperties for '{}'", unit));
    }
    // The slot lives with the bus (floating) and frees `p` when it goes:
    // after the reply, or when the connection closes with the call pending.
    // Both calls fail only for a null slot, and sd_bus_call_async gave one.
    (void)sd_bus_slot_set_destroy_callback(slot, [](void* u) { delete static_cast<Pending*>(u); });
    (void)sd_bus_slot_set_floating(slot, 1);
    sd_bus_slot_unref(slot);
  }

 private:
  struct Pending {
    SdBusUnitManager* self;
    std::string unit;
    Done done;
    Clock::time_point t0;
  };

  static int on_reply(sd_bus_message* reply, void* userdata, sd_bus_error*) {
    auto* p = static_cast<Pending*>(userdata);
    Done done = std::move(p->done);  // `p` goes with the slot after this returns
    if (!sd_bus_message_is_method_error(reply, nullptr)) {
      done({});
      return 1;
    }
    const sd_bus_error* e = sd_bus_message_get_error(reply);
    int err = sd_bus_message_get_errno(reply);
    // sd-bus answers a call that outlived its usec with a synthesized
    // org.freedesktop.DBus.Error.NoReply (ETIMEDOUT); a closed connection
    // gets the same name, so the elapsed time tells a timeout apart.
    bool timed_out = err == ETIMEDOUT && Clock::now() - p->t0 >= p->self->o_.call_timeout;
    done(p->self->call_error(p->unit, timed_out ? ETIMEDOUT : (err ? err : EIO),
                             e && e->message ? e->message : nullptr, !timed_out));
    return 1;
  }

  uint64_t timeout_usec() const { return static_cast<uint64_t>(o_.call_timeout.count()); }

  // A timeout is ErrorKind::Timeout naming the unit and the bound.
  Unexpected call_error(const std::string& unit, int err, const char* message, bool not_timeout = false) const {
    if (err == ETIMEDOUT && !not_timeout) {
      return Unexpected(Error{ETIMEDOUT,
                              fmt::format("SetUnitProperties on '{}': no reply from systemd within {} ms", unit,
                                          o_.call_timeout.count() / 1000),
                              ErrorKind::Timeout});
    }
    return fail(err, "SetUnitProperties on '{}': {}", unit, message ? message : errno_string(err));
  }

  Result<sd_bus*> connect(sd_event* event) const {
    sd_bus* bus = nullptr;
    int r;
    if (o_.address.empty()) {
      r = sd_bus_open_system(&bus);
    } else {
      r = sd_bus_new(&bus);
      if (r >= 0) r = sd_bus_set_address(bus, o_.address.c_str());
      if (r >= 0) r = sd_bus_start(bus);
    }
    if (r >= 0 && event) r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL);
    if (r < 0) {
      sd_bus_flush_close_unref(bus);
      if (o_.address.empty()) return fail_code(-r, "connecting to the system bus");
      return fail_code(-r, "connecting to the bus at '{}'", o_.address);
    }
    return bus;
  }

  static Result<sd_bus_message*> build(sd_bus* bus, const std::string& unit, const std::vector<UnitProperty>& props) {
    sd_bus_message* m = nullptr;
    int r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "SetUnitProperties");
    if (r >= 0) r = sd_bus_message_append(m, "sb", unit.c_str(), 1);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "(sv)");
    for (const auto& p : props) {
      if (r < 0) break;
      r = sd_bus_message_append(m, "(sv)", p.name.c_str(), "t", p.value);
    }
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r < 0) {
      sd_bus_message_unref(m);
      return fail_code(-r, "building SetUnitProperties for '{}'", unit);
    }
    return m;
  }

  SdBusOptions o_;
  std::mutex mu_;
  sd_bus* sync_bus_ = nullptr;
  sd_bus* async_bus_ = nullptr;  // the loop's thread only
};

}  // namespace

std::shared_ptr<UnitManager> make_sdbus_unit_manager(SdBusOptions o) {
  return std::make_shared<SdBusUnitManager>(std::move(o));
}
std::shared_ptr<UnitManager> make_sdbus_unit_manager(std::chrono::microseconds call_timeout) {
  SdBusOptions o;
  o.call_timeout = call_timeout;
  return make_sdbus_unit_manager(std::move(o));
}
std::shared_ptr<UnitManager> make_sdbus_unit_manager() { return make_sdbus_unit_manager(kDefaultUnitCallTimeout); }

}  // namespace podshim::cgroup
