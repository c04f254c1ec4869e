/* vk_fn.c - loads the Vulkan loader with dlopen and resolves the entry points of vk_fn.h, so the
 * binary has no link-time dependency on libvulkan. */
#include "vk_fn.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

int vk_fn_load(struct vk_fn *f, char *err, size_t err_len) {
    memset(f, 0, sizeof(*f));
    const char *path = getenv("SNIPER_VULKAN_LOADER");
    if (!path || !*path)
        path = "libvulkan.so.1";
    f->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!f->lib) {
        const char *why = dlerror();
        err_set(err, err_len, "no Vulkan loader: cannot open \"%s\" (%s)", path, why ? why : "?");
        return -ENOENT;
    }
    /* dlsym returns an object pointer; the loader's ABI makes it this function's address */
    void *sym = dlsym(f->lib, "vkGetInstanceProcAddr");
    memcpy(&f->vkGetInstanceProcAddr, &sym, sizeof(sym));
    if (!f->vkGetInstanceProcAddr) {
        err_set(err, err_len, "\"%s\" has no vkGetInstanceProcAddr: not a Vulkan loader", path);
        vk_fn_unload(f);
        return -ENOENT;
    }
#define VK_FN_GET(name)                                                                           \
    f->name = (PFN_##name)f->vkGetInstanceProcAddr(VK_NULL_HANDLE, #name);                        \
    if (!f->name) {                                                                               \
        err_set(err, err_len, "the Vulkan loader \"%s\" lacks %s (Vulkan 1.1 or later needed)",   \
                path, #name);                                                                     \
        vk_fn_unload(f);                                                                          \
        return -ENOENT;                                                                           \
    }
    VK_FN_GLOBAL(VK_FN_GET)
#undef VK_FN_GET
    return 0;
}

int vk_fn_load_instance(struct vk_fn *f, VkInstance inst, char *err, size_t err_len) {
#define VK_FN_GET(name)                                                                           \
    f->name = (PFN_##name)f->vkGetInstanceProcAddr(inst, #name);                                  \
    if (!f->name) {                                                                               \
        err_set(err, err_len, "the Vulkan instance lacks %s", #name);                             \
        return -ENOSYS;                                                                           \
    }
    VK_FN_INSTANCE(VK_FN_GET)
#undef VK_FN_GET
    return 0;
}

int vk_fn_load_device(struct vk_fn *f, VkDevice dev, char *err, size_t err_len) {
#define VK_FN_GET(name)                                                                           \
    f->name = (PFN_##name)f->vkGetDeviceProcAddr(dev, #name);                                     \
    if (!f->name) {                                                                               \
        err_set(err, err_len, "the Vulkan device lacks %s", #name);                               \
        return -ENOSYS;                                                                           \
    }
    VK_FN_DEVICE(VK_FN_GET)
#undef VK_FN_GET
    return 0;
}

/* The loader stays mapped once opened (no dlclose): NVIDIA's driver, which the loader brings in,
 * did not survive being unloaded and loaded again a dozen times in one process on the H100
 * (vkCreateInstance then failed with VK_ERROR_INCOMPATIBLE_DRIVER); dlopen's count keeps one copy. */
void vk_fn_unload(struct vk_fn *f) {
    memset(f, 0, sizeof(*f));
}

const char *vk_result_name(VkResult r) {
    switch (r) {
#define VK_RESULT_CASE(x) case x: return #x;
        VK_RESULT_CASE(VK_SUCCESS)
        VK_RESULT_CASE(VK_NOT_READY)
        VK_RESULT_CASE(VK_TIMEOUT)
        VK_RESULT_CASE(VK_INCOMPLETE)
        VK_RESULT_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
        VK_RESULT_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        VK_RESULT_CASE(VK_ERROR_INITIALIZATION_FAILED)
        VK_RESULT_CASE(VK_ERROR_DEVICE_LOST)
        VK_RESULT_CASE(VK_ERROR_MEMORY_MAP_FAILED)
        VK_RESULT_CASE(VK_ERROR_LAYER_NOT_PRESENT)
        VK_RESULT_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
        VK_RESULT_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
        VK_RESULT_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
        VK_RESULT_CASE(VK_ERROR_TOO_MANY_OBJECTS)
        VK_RESULT_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
        VK_RESULT_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
        VK_RESULT_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        VK_RESULT_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef VK_RESULT_CASE
    default:
        return "VK_ERROR_UNKNOWN";
    }
}
