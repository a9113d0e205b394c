// The pod and container many tests start from: pod p1 "web" in namespace
// "default" (cgroup /kubepods/pod1, Guaranteed) and its running NRI
// container c1 "app" (cgroup /kubepods/pod1/c1).
#pragma once

#include <gtest/gtest.h>

#include "shim/core/state.h"

namespace podshim::testutil {

inline core::Pod web_pod() {
  core::Pod p;
  p.uid = "p1";
  p.name = "web";
  p.namespace_ = "default";
  p.cgroup_path = "/kubepods/pod1";
  p.qos = core::QosClass::Guaranteed;
  return p;
}

// c1 with `r` desired and allocated.
inline core::Container app_container(const core::K8sResources& r) {
  core::Container c;
  c.id = "c1";
  c.pod_uid = "p1";
  c.name = "app";
  c.cgroup_path = "/kubepods/pod1/c1";
  c.state = "running";
  c.desired = c.allocated = r;
  c.source = core::Source::Nri;
  return c;
}

// Stores both in `store`.
inline ::testing::AssertionResult add_web_app(core::Store& store, const core::K8sResources& r) {
  if (auto s = store.upsert_pod(web_pod()); !s) return ::testing::AssertionFailure() << s.error().message;
  if (auto s = store.upsert_container(app_container(r)); !s) return ::testing::AssertionFailure() << s.error().message;
  return ::testing::AssertionSuccess();
}

}  // namespace podshim::testutil
