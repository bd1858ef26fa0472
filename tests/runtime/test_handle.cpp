// Owning Vulkan handles (runtime/vulkan/handle.hpp) with a counting destroy function in place of
// vkDestroy*: each object is destroyed exactly once, by whoever owns it last; an abandoned output
// of a failed create is never destroyed.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include <kiln/runtime/vulkan/handle.hpp>

namespace {

std::vector<VkBuffer> destroyed;
VkDevice destroyed_on = VK_NULL_HANDLE;

void count_destroy(VkDevice device, VkBuffer b, const VkAllocationCallbacks*) {
  destroyed.push_back(b);
  destroyed_on = device;
}

using counted = kiln::vulkan::device_handle<VkBuffer, count_destroy>;

VkDevice fake_device() { return reinterpret_cast<VkDevice>(std::uintptr_t{0x1000}); }
VkBuffer fake_buffer(std::uintptr_t n) { return reinterpret_cast<VkBuffer>(n); }

}  // namespace

TEST(VulkanHandle, DestroysOnceWithItsDevice) {
  destroyed.clear();
  {
    counted h(fake_device(), fake_buffer(7));
    EXPECT_TRUE(h);
    EXPECT_EQ(h.get(), fake_buffer(7));
  }
  EXPECT_EQ(destroyed, std::vector<VkBuffer>{fake_buffer(7)});
  EXPECT_EQ(destroyed_on, fake_device());
}

TEST(VulkanHandle, MovesOwnership) {
  destroyed.clear();
  {
    counted a(fake_device(), fake_buffer(1));
    counted b(std::move(a));
    EXPECT_FALSE(a);  // NOLINT: a moved-from handle is empty by contract
    counted c(fake_device(), fake_buffer(2));
    c = std::move(b);  // c's own object goes now
    EXPECT_EQ(destroyed, std::vector<VkBuffer>{fake_buffer(2)});
    EXPECT_EQ(c.get(), fake_buffer(1));
  }
  EXPECT_EQ(destroyed, (std::vector<VkBuffer>{fake_buffer(2), fake_buffer(1)}));
}

TEST(VulkanHandle, ReceiveReplacesAndAbandonForgets) {
  destroyed.clear();
  counted h(fake_device(), fake_buffer(3));
  *h.receive(fake_device()) = fake_buffer(4);  // as a vkCreate* call writes its output
  EXPECT_EQ(destroyed, std::vector<VkBuffer>{fake_buffer(3)});
  *h.receive(fake_device()) = fake_buffer(5);  // a failed create left something in its output
  h.abandon();
  EXPECT_FALSE(h);
  h.reset();
  EXPECT_EQ(destroyed, (std::vector<VkBuffer>{fake_buffer(3), fake_buffer(4)}));
}
