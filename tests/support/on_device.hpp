// A parameterized suite run on the CPU and on Vulkan (lavapipe in CI): its bool parameter says
// which device, its instances are named cpu and vulkan.
#pragma once

#include <gtest/gtest.h>

#include <kiln/runtime/device.hpp>

namespace ref {

class on_device : public ::testing::TestWithParam<bool> {
 protected:
  kiln::device dev() const { return GetParam() ? kiln::device::vulkan() : kiln::device::cpu(); }
};

}  // namespace ref

// Instantiates suite SUITE (derived from ref::on_device) on both devices.
#define KILN_ON_BOTH_DEVICES(SUITE)                                        \
  INSTANTIATE_TEST_SUITE_P(Devices, SUITE, ::testing::Values(false, true), \
                           [](const auto& info) { return info.param ? "vulkan" : "cpu"; })
