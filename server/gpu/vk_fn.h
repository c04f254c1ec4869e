/* vk_fn.h - the Vulkan entry points the backend calls, loaded at run time from the loader
 * (libvulkan.so.1, dlopen'd by vk_fn.c) so that sniperd starts, and says why it stays on the CPU,
 * on a machine without one. One X-macro list per level: global (before an instance), instance,
 * device. Private to server/gpu. */
#ifndef SNIPER_VK_FN_H
#define SNIPER_VK_FN_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#define VK_FN_GLOBAL(X)                                                                           \
    X(vkCreateInstance)                                                                           \
    X(vkEnumerateInstanceVersion)

#define VK_FN_INSTANCE(X)                                                                         \
    X(vkDestroyInstance)                                                                          \
    X(vkEnumeratePhysicalDevices)                                                                 \
    X(vkGetPhysicalDeviceProperties2)                                                             \
    X(vkGetPhysicalDeviceFeatures2)                                                               \
    X(vkGetPhysicalDeviceMemoryProperties)                                                        \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                                   \
    X(vkEnumerateDeviceExtensionProperties)                                                       \
    X(vkCreateDevice)                                                                             \
    X(vkGetDeviceProcAddr)

#define VK_FN_DEVICE(X)                                                                           \
    X(vkDestroyDevice)                                                                            \
    X(vkGetDeviceQueue)                                                                           \
    X(vkCreateBuffer)                                                                             \
    X(vkDestroyBuffer)                                                                            \
    X(vkGetBufferMemoryRequirements)                                                              \
    X(vkAllocateMemory)                                                                           \
    X(vkFreeMemory)                                                                               \
    X(vkBindBufferMemory)                                                                         \
    X(vkMapMemory)                                                                                \
    X(vkUnmapMemory)                                                                              \
    X(vkGetBufferDeviceAddress)                                                                   \
    X(vkCreateShaderModule)                                                                       \
    X(vkDestroyShaderModule)                                                                      \
    X(vkCreatePipelineLayout)                                                                     \
    X(vkDestroyPipelineLayout)                                                                    \
    X(vkCreateComputePipelines)                                                                   \
    X(vkDestroyPipeline)                                                                          \
    X(vkCreateCommandPool)                                                                        \
    X(vkDestroyCommandPool)                                                                       \
    X(vkAllocateCommandBuffers)                                                                   \
    X(vkResetCommandBuffer)                                                                       \
    X(vkBeginCommandBuffer)                                                                       \
    X(vkEndCommandBuffer)                                                                         \
    X(vkCmdBindPipeline)                                                                          \
    X(vkCmdPushConstants)                                                                         \
    X(vkCmdDispatch)                                                                              \
    X(vkCmdPipelineBarrier)                                                                       \
    X(vkCmdCopyBuffer)                                                                            \
    X(vkCmdFillBuffer)                                                                            \
    X(vkCreateFence)                                                                              \
    X(vkDestroyFence)                                                                             \
    X(vkResetFences)                                                                              \
    X(vkWaitForFences)                                                                            \
    X(vkGetFenceStatus)                                                                           \
    X(vkQueueSubmit)                                                                              \
    X(vkCreateQueryPool)                                                                          \
    X(vkDestroyQueryPool)                                                                         \
    X(vkCmdResetQueryPool)                                                                        \
    X(vkCmdWriteTimestamp)                                                                        \
    X(vkGetQueryPoolResults)

struct vk_fn {
    void *lib; /* the loader's handle */
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define VK_FN_FIELD(name) PFN_##name name;
    VK_FN_GLOBAL(VK_FN_FIELD)
    VK_FN_INSTANCE(VK_FN_FIELD)
    VK_FN_DEVICE(VK_FN_FIELD)
#undef VK_FN_FIELD
};

/* Opens the loader (SNIPER_VULKAN_LOADER, else libvulkan.so.1) and the global entry points.
 * Returns 0 or -ENOENT with a message naming the library and dlerror's reason. */
int vk_fn_load(struct vk_fn *f, char *err, size_t err_len);

/* The instance-level entry points of inst. Returns 0 or -ENOSYS naming the missing one. */
int vk_fn_load_instance(struct vk_fn *f, VkInstance inst, char *err, size_t err_len);

/* The device-level entry points of dev. Returns 0 or -ENOSYS naming the missing one. */
int vk_fn_load_device(struct vk_fn *f, VkDevice dev, char *err, size_t err_len);

/* Closes the loader. Accepts a zeroed f. */
void vk_fn_unload(struct vk_fn *f);

/* A VkResult's name ("VK_ERROR_DEVICE_LOST"), for messages. */
const char *vk_result_name(VkResult r);

#endif
