/* gpu.c - gpu.h on Vulkan 1.2: the device, its buffers (reached by device address), the kernels'
 * pipelines (one push-constant layout for all), and one command buffer recorded and submitted with
 * a fence. Single-threaded: one engine thread owns a struct gpu.
 *
 * Memory: every buffer is device-local; where such memory is also host-visible (an APU, lavapipe)
 * it is mapped and written directly, otherwise copies go through a host-visible staging buffer in
 * chunks. A device that fails (VK_ERROR_DEVICE_LOST) stays failed: every later call returns -EIO. */
#include "gpu.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "fault.h"
#include "gpu_shaders.h"
#include "spin.h"
#include "vk_fn.h"

#define GPU_STAGING_BYTES ((size_t)16 << 20)
#define GPU_MAX_DEVICES 16

struct gpu_buf {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceAddress addr;
    size_t bytes;
    void *map; /* host view of unified memory or of a host buffer, or NULL */
    bool host; /* in host memory (gpu_buf_new_host): not counted in the budget */
};

struct gpu {
    struct vk_fn fn;
    VkInstance inst;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    struct gpu_info info;
    VkPhysicalDeviceMemoryProperties mem;
    uint32_t mt_device;  /* memory type of buffers */
    uint32_t mt_staging; /* host-visible, coherent */
    VkPipelineLayout layout;
    VkPipeline *pipe;    /* [gpu_spirv_count], each made at its first dispatch */
    bool spec_fused;     /* the pipelines' FMA_FUSED */
    VkCommandPool pool;
    /* a ring of command buffers: gpu_flush submits one and records on into the next while the
     * device runs it; ring_busy[i]: submitted, its fence not yet waited for */
    VkCommandBuffer ring[GPU_RING];
    VkFence ring_fence[GPU_RING];
    bool ring_busy[GPU_RING];
    int ring_cur;
    VkCommandBuffer cmd; /* ring[ring_cur] */
    VkQueryPool stamps;  /* GPU_STAMPS timestamps, VK_NULL_HANDLE where the queue has none */
    uint32_t n_stamps;   /* written in the recording (or the submit) now */
    double stamp_ns;     /* nanoseconds a tick */
    struct gpu_buf *staging; /* NULL on unified memory */
    uint64_t used_bytes, budget_bytes;
    bool recording;
    bool unordered;      /* work recorded since the last barrier (or the recording's start) */
    uint64_t n_dispatch, n_barrier; /* recorded since the device was opened (gpu_counts) */
    int rec_rc;          /* the first recording error */
    bool lost;           /* the device failed */
    struct gpu_buf *phases; /* GPU_PHASES (make PHASES=1): 32 clock stamps a kernel */
    char err[256];
};

static struct gpu_buf *buf_make(struct gpu *g, size_t bytes, bool host, char *err,
                                size_t err_len);
static void stamps_new(struct gpu *g);
static int ring_wait(struct gpu *g);

/* ---- instance and device facts ---------------------------------------------------------------- */

/* The process's one Vulkan instance, made at the first need and kept: NVIDIA's driver fails
 * vkCreateInstance (VK_ERROR_INCOMPATIBLE_DRIVER) after a dozen or so instances were made and
 * destroyed in one process (seen on the H100 from the 16th test of a test binary on); every
 * gpu_list and gpu_open takes this one, and instance_free leaves it. */
static pthread_mutex_t instance_mu = PTHREAD_MUTEX_INITIALIZER;
static VkInstance instance_kept;

static int instance_new(struct vk_fn *fn, VkInstance *inst, char *err, size_t err_len) {
    int rc = vk_fn_load(fn, err, err_len);
    if (rc < 0)
        return rc;
    uint32_t version = 0;
    if (fn->vkEnumerateInstanceVersion(&version) != VK_SUCCESS || version < VK_API_VERSION_1_2) {
        err_set(err, err_len, "the Vulkan loader offers version %u.%u; 1.2 is needed",
                VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
        vk_fn_unload(fn);
        return -ENOSYS;
    }
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "sniperd",
                             .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app};
    pthread_mutex_lock(&instance_mu);
    VkResult r = instance_kept ? VK_SUCCESS : fn->vkCreateInstance(&ci, NULL, &instance_kept);
    *inst = instance_kept;
    pthread_mutex_unlock(&instance_mu);
    if (r != VK_SUCCESS) {
        err_set(err, err_len, "vkCreateInstance failed: %s (no Vulkan driver installed?)",
                vk_result_name(r));
        vk_fn_unload(fn);
        return r == VK_ERROR_INCOMPATIBLE_DRIVER ? -ENODEV : -EIO;
    }
    if ((rc = vk_fn_load_instance(fn, *inst, err, err_len)) < 0) {
        vk_fn_unload(fn);
        return rc;
    }
    return 0;
}

/* Lets go of the instance instance_new gave (the process keeps it) and of fn. */
static void instance_free(struct vk_fn *fn, VkInstance inst) {
    (void)inst;
    vk_fn_unload(fn);
}

static bool has_extension(const struct vk_fn *fn, VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (fn->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *p = calloc(n, sizeof(*p));
    bool found = false;
    if (p && fn->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(p[i].extensionName, name) == 0;
    free(p);
    return found;
}

/* The features the kernels need, as device creation asks for them. */
struct gpu_features {
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDeviceVulkan11Features v11;
    VkPhysicalDeviceVulkan12Features v12;
};

static void features_chain(struct gpu_features *f) {
    memset(f, 0, sizeof(*f));
    f->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f->v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f->v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    f->f2.pNext = &f->v11;
    f->v11.pNext = &f->v12;
}

/* Names the first feature the backend needs that f lacks, or NULL. */
static const char *features_missing(const struct gpu_features *f) {
    if (!f->f2.features.shaderInt64)
        return "shaderInt64";
    if (!f->f2.features.shaderFloat64)
        return "shaderFloat64 (the activation quantizers divide in double to round as the CPU)";
    if (!f->v12.bufferDeviceAddress)
        return "bufferDeviceAddress";
    if (!f->v12.storageBuffer8BitAccess)
        return "storageBuffer8BitAccess";
    if (!f->v11.storageBuffer16BitAccess)
        return "storageBuffer16BitAccess";
    if (!f->v12.shaderInt8)
        return "shaderInt8";
    return NULL;
}

/* Names what the backend needs of the device's subgroups that sub lacks, or NULL: the activation
 * quantizers' reductions (quantize_q8_K.glsl) take subgroup arithmetic in compute kernels, and a
 * Q8_K block's 64 invocations as whole subgroups. */
static const char *subgroups_missing(const VkPhysicalDeviceSubgroupProperties *sub) {
    const VkSubgroupFeatureFlags ops = VK_SUBGROUP_FEATURE_BASIC_BIT |
                                       VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    const uint32_t n = sub->subgroupSize;
    if (!(sub->supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
        (sub->supportedOperations & ops) != ops || n < 4 || n > 64 || (n & (n - 1)))
        return "subgroup arithmetic in compute kernels, in subgroups of 4 to 64 (the activation "
               "quantizers' reductions)";
    return NULL;
}

static uint64_t largest_heap(const VkPhysicalDeviceMemoryProperties *m, bool device_local) {
    uint64_t best = 0;
    for (uint32_t i = 0; i < m->memoryHeapCount; i++) {
        bool dl = (m->memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
        if (dl == device_local && m->memoryHeaps[i].size > best)
            best = m->memoryHeaps[i].size;
    }
    return best;
}

/* The memory type for want (all of its flags), preferring also those of prefer; -1 if none. */
static int memory_type(const VkPhysicalDeviceMemoryProperties *m, uint32_t bits,
                       VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) {
    int found = -1;
    for (uint32_t i = 0; i < m->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = m->memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (f & want) != want)
            continue;
        if ((f & prefer) == prefer)
            return (int)i;
        if (found < 0)
            found = (int)i;
    }
    return found;
}

static enum gpu_type type_of(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return GPU_TYPE_INTEGRATED;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return GPU_TYPE_DISCRETE;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return GPU_TYPE_VIRTUAL;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return GPU_TYPE_CPU;
    default: return GPU_TYPE_OTHER;
    }
}

static void info_fill(const struct vk_fn *fn, VkPhysicalDevice pd, int index, struct gpu_info *in) {
    memset(in, 0, sizeof(*in));
    in->index = index;
    VkPhysicalDeviceFloatControlsProperties fc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sub = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &fc};
    VkPhysicalDeviceDriverProperties drv = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &sub};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &drv};
    fn->vkGetPhysicalDeviceProperties2(pd, &p2);
    snprintf(in->name, sizeof(in->name), "%s", p2.properties.deviceName);
    size_t dn = strnlen(drv.driverName, sizeof(in->driver) - 2);
    memcpy(in->driver, drv.driverName, dn);
    in->driver[dn] = ' ';
    snprintf(in->driver + dn + 1, sizeof(in->driver) - dn - 1, "%.*s",
             (int)(sizeof(in->driver) - dn - 2), drv.driverInfo);
    in->type = type_of(p2.properties.deviceType);
    in->api_version = p2.properties.apiVersion;
    in->subgroup_size = sub.subgroupSize;
    in->denorm_preserve = fc.shaderDenormPreserveFloat32;
    for (int i = 0; i < 3; i++)
        in->max_groups[i] = p2.properties.limits.maxComputeWorkGroupCount[i];
    VkPhysicalDeviceMemoryProperties m;
    fn->vkGetPhysicalDeviceMemoryProperties(pd, &m);
    in->device_bytes = largest_heap(&m, true);
    in->host_bytes = largest_heap(&m, false);
    /* a discrete card may map its memory too (resizable BAR), but reads through that map cross
     * the bus uncached: only an integrated or CPU device counts as one memory */
    in->unified = (in->type == GPU_TYPE_INTEGRATED || in->type == GPU_TYPE_CPU) &&
                  memory_type(&m, ~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                           VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0) >= 0;
    in->int_dot = has_extension(fn, pd, "VK_KHR_shader_integer_dot_product");
    in->coopmat = has_extension(fn, pd, "VK_KHR_cooperative_matrix");
    struct gpu_features f;
    features_chain(&f);
    const char *missing = NULL;
    if (in->api_version < VK_API_VERSION_1_2)
        missing = "Vulkan 1.2";
    else if (!(missing = subgroups_missing(&sub))) {
        fn->vkGetPhysicalDeviceFeatures2(pd, &f.f2);
        missing = features_missing(&f);
    }
    in->usable = missing == NULL;
    if (missing)
        snprintf(in->why_not, sizeof(in->why_not), "lacks %s", missing);
}

/* ---- listing and choosing ---------------------------------------------------------------------- */

/* The physical devices of a new instance into pd (at most max). Returns their count or an error. */
static int physical_devices(struct vk_fn *fn, VkInstance *inst, VkPhysicalDevice *pd, int max,
                            char *err, size_t err_len) {
    int rc = instance_new(fn, inst, err, err_len);
    if (rc < 0)
        return rc;
    uint32_t n = (uint32_t)max;
    VkResult r = fn->vkEnumeratePhysicalDevices(*inst, &n, pd);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        err_set(err, err_len, "vkEnumeratePhysicalDevices failed: %s", vk_result_name(r));
        instance_free(fn, *inst);
        return -EIO;
    }
    return (int)n;
}

int gpu_list(struct gpu_info *out, int max, char *err, size_t err_len) {
    struct vk_fn fn;
    VkInstance inst = VK_NULL_HANDLE;
    VkPhysicalDevice pd[GPU_MAX_DEVICES];
    int n = physical_devices(&fn, &inst, pd, GPU_MAX_DEVICES, err, err_len);
    if (n < 0)
        return n;
    for (int i = 0; i < n && i < max; i++)
        info_fill(&fn, pd[i], i, &out[i]);
    instance_free(&fn, inst);
    return n;
}

/* The auto choice's rank of a device (higher first); 0: never chosen by auto. */
static int auto_rank(const struct gpu_info *in) {
    if (!in->usable)
        return 0;
    return in->type == GPU_TYPE_DISCRETE ? 3 : in->type == GPU_TYPE_INTEGRATED ? 2
           : in->type == GPU_TYPE_VIRTUAL ? 1 : 0;
}

int gpu_choose(const char *spec, char *err, size_t err_len) {
    if (spec && strcmp(spec, "none") == 0)
        return -1;
    bool automatic = !spec || !*spec || strcmp(spec, "auto") == 0;
    char *end = NULL;
    long want = automatic ? -1 : strtol(spec, &end, 10);
    if (!automatic && (end == spec || *end || want < 0)) {
        err_set(err, err_len, "--gpu \"%s\": expected auto, none or a device number", spec);
        return -EINVAL;
    }
    struct gpu_info in[GPU_MAX_DEVICES];
    int n = gpu_list(in, GPU_MAX_DEVICES, err, err_len);
    if (n < 0)
        return automatic ? -1 : n; /* auto: no loader means the CPU; err says why */
    if (!automatic) {
        if (want >= n || want >= GPU_MAX_DEVICES) {
            err_set(err, err_len, "--gpu %ld: there are %d Vulkan devices", want, n);
            return -EINVAL;
        }
        if (!in[want].usable) {
            err_set(err, err_len, "--gpu %ld (\"%s\") %s", want, in[want].name, in[want].why_not);
            return -EINVAL;
        }
        return (int)want;
    }
    int best = -1;
    for (int i = 0; i < n && i < GPU_MAX_DEVICES; i++)
        if (auto_rank(&in[i]) > 0 && (best < 0 || auto_rank(&in[i]) > auto_rank(&in[best])))
            best = i;
    if (best < 0)
        err_set(err, err_len, "no usable GPU among %d Vulkan devices (a CPU device such as "
                "lavapipe is used only when named: --gpu N)", n);
    return best;
}

/* ---- opening ---------------------------------------------------------------------------------- */

static int queue_family(const struct vk_fn *fn, VkPhysicalDevice pd) {
    uint32_t n = 0;
    fn->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties q[32];
    n = n > 32 ? 32 : n;
    fn->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    int any = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
            continue;
        if (!(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            return (int)i; /* a compute-only family: no graphics work shares it */
        if (any < 0)
            any = (int)i;
    }
    return any;
}

static int device_new(struct gpu *g, int family, char *err, size_t err_len) {
    struct gpu_features f;
    features_chain(&f);
    f.f2.features.shaderInt64 = VK_TRUE;
    f.f2.features.shaderFloat64 = VK_TRUE;
    f.v11.storageBuffer16BitAccess = VK_TRUE;
    f.v12.bufferDeviceAddress = VK_TRUE;
    f.v12.storageBuffer8BitAccess = VK_TRUE;
    f.v12.shaderInt8 = VK_TRUE;
    /* the integer dot product, where the device has it: the kernels named *_dot use it */
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR idp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR,
        .shaderIntegerDotProduct = VK_TRUE};
    const char *ext[2];
    uint32_t n_ext = 0;
    if (g->info.int_dot) {
        f.v12.pNext = &idp;
        ext[n_ext++] = "VK_KHR_shader_integer_dot_product";
    }
#ifdef GPU_PHASES /* make PHASES=1: the kernels read the device's clock */
    VkPhysicalDeviceShaderClockFeaturesKHR clk = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR,
        .shaderSubgroupClock = VK_TRUE, .shaderDeviceClock = VK_TRUE};
    ext[n_ext++] = "VK_KHR_shader_clock";
    clk.pNext = f.v12.pNext;
    f.v12.pNext = &clk;
    f.v12.shaderBufferInt64Atomics = VK_TRUE;
#endif
    const float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = (uint32_t)family,
                                  .queueCount = 1,
                                  .pQueuePriorities = &prio};
    VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &f.f2,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qi,
                             .enabledExtensionCount = n_ext,
                             .ppEnabledExtensionNames = ext};
    VkResult r = g->fn.vkCreateDevice(g->phys, &ci, NULL, &g->dev);
    if (r != VK_SUCCESS) {
        err_set(err, err_len, "vkCreateDevice on \"%s\" failed: %s", g->info.name,
                vk_result_name(r));
        g->dev = VK_NULL_HANDLE;
        return -EIO;
    }
    int rc = vk_fn_load_device(&g->fn, g->dev, err, err_len);
    if (rc == 0)
        g->fn.vkGetDeviceQueue(g->dev, (uint32_t)family, 0, &g->queue);
    return rc;
}

/* True for a kernel built with the integer dot product instructions (common.glsl's INT_DOT):
 * its name ends in "_dot". */
static bool kernel_needs_int_dot(const char *name) {
    const size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, "_dot") == 0;
}

/* Makes the pipelines' layout and their table, each pipeline made at its kernel's first dispatch
 * (pipeline_make) with the shaders' FMA_FUSED constant (common.glsl) set to fused; a *_dot
 * kernel is offered (gpu_kernel) only where the device has the integer dot product. */
static int pipelines_new(struct gpu *g, bool fused, char *err, size_t err_len) {
    VkPushConstantRange range = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = GPU_PUSH_MAX};
    VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &range};
    if (g->fn.vkCreatePipelineLayout(g->dev, &li, NULL, &g->layout) != VK_SUCCESS) {
        err_set(err, err_len, "vkCreatePipelineLayout failed");
        return -EIO;
    }
    g->pipe = calloc((size_t)gpu_spirv_count + 1, sizeof(*g->pipe));
    if (!g->pipe) {
        err_set(err, err_len, "out of memory");
        return -ENOMEM;
    }
    g->spec_fused = fused;
    return 0;
}

/* Makes kernel i's pipeline (pipelines_new's FMA_FUSED), at its first dispatch: a device opened
 * compiles only the kernels its work uses (lavapipe takes seconds for all of them). Returns 0 or
 * -EIO with the reason in g->err. */
static int pipeline_make(struct gpu *g, int i) {
    const struct gpu_spirv *s = &gpu_spirv_table[i];
    const uint32_t fused_value = g->spec_fused;
    const VkSpecializationMapEntry entry = {.constantID = 0, .offset = 0, .size = 4};
    const VkSpecializationInfo spec = {.mapEntryCount = 1, .pMapEntries = &entry,
                                       .dataSize = 4, .pData = &fused_value};
    const VkSpecializationInfo *sp = &spec;
#ifdef GPU_PHASES /* common.glsl's PHASE_CLOCK: where the stamps go, and the kernel's index */
    const uint64_t pa = gpu_buf_addr(g->phases);
    const uint32_t vals[4] = {g->spec_fused, (uint32_t)pa, (uint32_t)(pa >> 32), (uint32_t)i};
    const VkSpecializationMapEntry ents[4] = {{0, 0, 4}, {1, 4, 4}, {2, 8, 4}, {3, 12, 4}};
    const VkSpecializationInfo spec_phases = {.mapEntryCount = 4, .pMapEntries = ents,
                                              .dataSize = 16, .pData = vals};
    sp = &spec_phases;
#endif
    uint32_t *words = malloc(*s->bytes); /* the code is bytes; the module wants words */
    if (!words) {
        err_set(g->err, sizeof(g->err), "kernel \"%s\": out of memory", s->name);
        return -EIO;
    }
    memcpy(words, s->code, *s->bytes);
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = *s->bytes,
                                   .pCode = words};
    VkShaderModule mod;
    VkResult r = g->fn.vkCreateShaderModule(g->dev, &mi, NULL, &mod);
    free(words);
    if (r == VK_SUCCESS) {
        VkComputePipelineCreateInfo pi = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                      .module = mod,
                      .pName = "main",
                      .pSpecializationInfo = sp},
            .layout = g->layout};
        r = g->fn.vkCreateComputePipelines(g->dev, VK_NULL_HANDLE, 1, &pi, NULL, &g->pipe[i]);
        g->fn.vkDestroyShaderModule(g->dev, mod, NULL);
    }
    if (r != VK_SUCCESS) {
        g->pipe[i] = VK_NULL_HANDLE;
        err_set(g->err, sizeof(g->err), "kernel \"%s\": the pipeline could not be made: %s",
                s->name, vk_result_name(r));
        return -EIO;
    }
    return 0;
}

static void pipelines_free(struct gpu *g) {
    for (int i = 0; g->pipe && i < gpu_spirv_count; i++)
        if (g->pipe[i])
            g->fn.vkDestroyPipeline(g->dev, g->pipe[i], NULL);
    if (g->layout)
        g->fn.vkDestroyPipelineLayout(g->dev, g->layout, NULL);
    free(g->pipe);
    g->pipe = NULL;
    g->layout = VK_NULL_HANDLE;
}

/* Triples whose fma rounded once differs from a multiply rounded then an add: (1 + 2^-12)^2 -
 * (1 + 2^-11) is 2^-24 exactly, 0 after the product's rounding; and a product of two odd
 * mantissas near the top. */
static const float fma_probe[][3] = {
    {1.0f + 0x1p-12f, 1.0f + 0x1p-12f, -(1.0f + 0x1p-11f)},
    {0.1f, 10.0f, -1.0f},
    {16777215.0f, 1.00000012f, -16777217.0f},
};

/* Whether the device's fma() rounds once, by running probe_fma. Returns 1, 0, or an error. */
static int fma_is_fused(struct gpu *g, char *err, size_t err_len) {
    enum { N = sizeof(fma_probe) / sizeof(fma_probe[0]) };
    int k = gpu_kernel(g, "probe_fma");
    struct gpu_buf *in = k >= 0 ? gpu_buf_new(g, sizeof(fma_probe), err, err_len) : NULL;
    struct gpu_buf *out = in ? gpu_buf_new(g, N * sizeof(float), err, err_len) : NULL;
    float got[N];
    int rc = out ? gpu_buf_write(g, in, 0, fma_probe, sizeof(fma_probe)) : -ENOMEM;
    if (rc == 0 && (rc = gpu_begin(g)) == 0) {
        struct { uint64_t in, out; uint32_t n; } push = {gpu_buf_addr(in), gpu_buf_addr(out), N};
        gpu_dispatch(g, k, &push, sizeof(push), 1, 1, 1);
        if ((rc = gpu_submit(g)) == 0)
            rc = gpu_buf_read(g, out, 0, got, sizeof(got));
    }
    bool fused = rc == 0;
    for (int i = 0; fused && i < N; i++) {
        float want = fmaf(fma_probe[i][0], fma_probe[i][1], fma_probe[i][2]);
        fused = memcmp(&want, &got[i], sizeof(want)) == 0;
    }
    gpu_buf_free(g, in);
    gpu_buf_free(g, out);
    if (rc < 0 && k >= 0)
        err_set(err, err_len, "the fma probe failed: %s", g->err[0] ? g->err : err);
    return rc < 0 && k >= 0 ? rc : fused;
}

static int commands_new(struct gpu *g, int family, char *err, size_t err_len) {
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = (uint32_t)family};
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = GPU_RING};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (g->fn.vkCreateCommandPool(g->dev, &pi, NULL, &g->pool) != VK_SUCCESS) {
        g->pool = VK_NULL_HANDLE;
        err_set(err, err_len, "vkCreateCommandPool failed");
        return -EIO;
    }
    ai.commandPool = g->pool;
    stamps_new(g);
    if (g->fn.vkAllocateCommandBuffers(g->dev, &ai, g->ring) != VK_SUCCESS) {
        err_set(err, err_len, "vkAllocateCommandBuffers failed");
        return -EIO;
    }
    for (int i = 0; i < GPU_RING; i++)
        if (g->fn.vkCreateFence(g->dev, &fi, NULL, &g->ring_fence[i]) != VK_SUCCESS) {
            g->ring_fence[i] = VK_NULL_HANDLE;
            err_set(err, err_len, "vkCreateFence failed");
            return -EIO;
        }
    g->cmd = g->ring[0];
    return 0;
}

/* The timestamp pool (gpu_stamp), where the queue counts time; none is not an error. */
static void stamps_new(struct gpu *g) {
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    g->fn.vkGetPhysicalDeviceProperties2(g->phys, &p2);
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = GPU_STAMPS};
    g->stamp_ns = p2.properties.limits.timestampPeriod;
    if (!p2.properties.limits.timestampComputeAndGraphics ||
        g->fn.vkCreateQueryPool(g->dev, &qi, NULL, &g->stamps) != VK_SUCCESS)
        g->stamps = VK_NULL_HANDLE;
}

static int memory_types(struct gpu *g, char *err, size_t err_len) {
    g->fn.vkGetPhysicalDeviceMemoryProperties(g->phys, &g->mem);
    const VkMemoryPropertyFlags dl = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int dev = g->info.unified ? memory_type(&g->mem, ~0u, dl | hv, 0)
                              : memory_type(&g->mem, ~0u, dl, 0);
    int stg = memory_type(&g->mem, ~0u, hv, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (dev < 0 || stg < 0) {
        err_set(err, err_len, "\"%s\" has no %s memory type", g->info.name,
                dev < 0 ? "device-local" : "host-visible coherent");
        return -ENODEV;
    }
    g->mt_device = (uint32_t)dev;
    g->mt_staging = (uint32_t)stg;
    return 0;
}

struct gpu *gpu_open(int index, uint64_t budget_bytes, char *err, size_t err_len) {
    struct gpu *g = calloc(1, sizeof(*g));
    VkPhysicalDevice pd[GPU_MAX_DEVICES];
    if (!g) {
        err_set(err, err_len, "out of memory");
        return NULL;
    }
    int n = physical_devices(&g->fn, &g->inst, pd, GPU_MAX_DEVICES, err, err_len);
    if (n < 0) {
        free(g);
        return NULL;
    }
    int family = -1;
    if (index < 0 || index >= n) {
        err_set(err, err_len, "no Vulkan device %d (there are %d)", index, n);
        goto fail;
    }
    g->phys = pd[index];
    info_fill(&g->fn, g->phys, index, &g->info);
    if (!g->info.usable) {
        err_set(err, err_len, "\"%s\" %s", g->info.name, g->info.why_not);
        goto fail;
    }
    if ((family = queue_family(&g->fn, g->phys)) < 0) {
        err_set(err, err_len, "\"%s\" has no compute queue", g->info.name);
        goto fail;
    }
    g->budget_bytes = budget_bytes ? budget_bytes : g->info.device_bytes;
    const char *no_map = getenv("SNIPER_GPU_NO_MAP"); /* tests: the staging path on an APU */
    if (no_map && *no_map == '1')
        g->info.unified = false;
    if (memory_types(g, err, err_len) < 0 || device_new(g, family, err, err_len) < 0 ||
        commands_new(g, family, err, err_len) < 0 || pipelines_new(g, true, err, err_len) < 0)
        goto fail;
    if (!g->info.unified && !(g->staging = buf_make(g, GPU_STAGING_BYTES, true, err, err_len)))
        goto fail;
#ifdef GPU_PHASES
    if (!(g->phases = gpu_buf_new(g, (size_t)(gpu_spirv_count + 1) * 256, err, err_len)))
        goto fail;
#endif
    int fused = fma_is_fused(g, err, err_len);
    if (fused < 0)
        goto fail;
    g->info.fma_fused = fused;
    if (!fused) { /* the kernels round fma once the slow way (common.glsl's fma_rn) */
        pipelines_free(g);
        if (pipelines_new(g, false, err, err_len) < 0)
            goto fail;
    }
    return g;
fail:
    gpu_close(g);
    return NULL;
}

#ifdef GPU_PHASES
/* ---- the in-kernel clock (make PHASES=1; common.glsl's PHASE_CLOCK) ---------------------------- */

struct phase_row {
    int k;          /* the kernel */
    uint64_t t[32]; /* its stamps (ns): workgroup 0's start, PHASE(1..29), end; every one's end */
};

static int phase_cmp(const void *a, const void *b) {
    const struct phase_row *x = a, *y = b;
    return x->t[0] < y->t[0] ? -1 : x->t[0] > y->t[0];
}

/* Prints to stderr each kernel's last dispatch, in the order they started: its start (us after
 * the first kernel's), then from its workgroup 0's start (ns) that workgroup's PHASE(j) stamps
 * and end, and the last workgroup's end. The device's clock (clockRealtimeEXT), so gaps between
 * kernels show too. */
static void phases_print(struct gpu *g) {
    if (!g->phases || g->lost)
        return;
    const int n = gpu_spirv_count;
    uint64_t *t = calloc((size_t)n * 32, 8);
    struct phase_row *rows = calloc((size_t)n, sizeof(*rows));
    if (!t || !rows || gpu_buf_read(g, g->phases, 0, t, (size_t)n * 256) < 0) {
        free(t);
        free(rows);
        return;
    }
    int m = 0;
    for (int k = 0; k < n; k++)
        if (t[k * 32]) {
            rows[m].k = k;
            memcpy(rows[m].t, t + k * 32, 256);
            m++;
        }
    qsort(rows, (size_t)m, sizeof(*rows), phase_cmp);
    fprintf(stderr, "phases (ns; each kernel's last dispatch; start from the first, then from its "
                    "start: wg0's phases, wg0 end, all end):\n");
    for (int r = 0; r < m; r++) {
        const uint64_t *u = rows[r].t;
        fprintf(stderr, "  %-28s start %9.3f us |", gpu_spirv_table[rows[r].k].name,
                (double)(u[0] - rows[0].t[0]) / 1000.0);
        for (int j = 1; j < 30; j++)
            if (u[j])
                fprintf(stderr, " p%d %lld", j, (long long)(u[j] - u[0]));
        fprintf(stderr, " | end %lld all %lld\n", (long long)(u[30] - u[0]),
                (long long)(u[31] - u[0]));
    }
    free(t);
    free(rows);
}
#endif

void gpu_close(struct gpu *g) {
    if (!g)
        return;
    if (g->dev) {
#ifdef GPU_PHASES
        phases_print(g);
        gpu_buf_free(g, g->phases);
#endif
        if (g->staging) {
            g->used_bytes += g->staging->bytes; /* never counted: see buf_make */
            gpu_buf_free(g, g->staging);
        }
        ring_wait(g); /* nothing should be in flight: gpu_submit waits; in case */
        for (int i = 0; i < GPU_RING; i++)
            if (g->ring_fence[i])
                g->fn.vkDestroyFence(g->dev, g->ring_fence[i], NULL);
        if (g->stamps)
            g->fn.vkDestroyQueryPool(g->dev, g->stamps, NULL);
        if (g->pool)
            g->fn.vkDestroyCommandPool(g->dev, g->pool, NULL);
        pipelines_free(g);
        g->fn.vkDestroyDevice(g->dev, NULL);
    }
    instance_free(&g->fn, g->inst);
    free(g);
}

const struct gpu_info *gpu_get_info(const struct gpu *g) {
    return &g->info;
}

uint64_t gpu_used_bytes(const struct gpu *g) {
    return g->used_bytes;
}

uint64_t gpu_budget_bytes(const struct gpu *g) {
    return g->budget_bytes;
}

const char *gpu_describe(const struct gpu *g, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < g->mem.memoryHeapCount && used < n; i++) {
        const VkMemoryHeap *h = &g->mem.memoryHeaps[i];
        int w = snprintf(buf + used, n - used, "%sheap %u: %.1f GiB%s", i ? "; " : "", i,
                         (double)h->size / (double)(1u << 30),
                         h->flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT ? " device-local" : "");
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < n)
        snprintf(buf + used, n - used, "; budget %.0f MiB%s; fma %s",
                 (double)g->budget_bytes / 1048576.0, g->info.unified ? " (unified memory)" : "",
                 g->info.fma_fused ? "fused" : "split by the compiler: emulated, rounded once");
    return buf;
}

const char *gpu_error(const struct gpu *g) {
    return g->err;
}

/* ---- buffers ---------------------------------------------------------------------------------- */

static int fail_device(struct gpu *g, const char *what, VkResult r) {
    err_set(g->err, sizeof(g->err), "%s failed on \"%s\": %s%s", what, g->info.name,
            vk_result_name(r), r == VK_ERROR_DEVICE_LOST ? " (the device is lost)" : "");
    if (r == VK_ERROR_DEVICE_LOST)
        g->lost = true;
    return -EIO;
}

/* A buffer of bytes in device memory (host: in the staging memory type, mapped), not zeroed, not
 * counted against the budget. Returns it or NULL with a message. */
static struct gpu_buf *buf_make(struct gpu *g, size_t bytes, bool host, char *err,
                                size_t err_len) {
    struct gpu_buf *b = calloc(1, sizeof(*b));
    if (!b) {
        err_set(err, err_len, "out of memory");
        return NULL;
    }
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = bytes,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                      VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = g->fn.vkCreateBuffer(g->dev, &bi, NULL, &b->buf);
    if (r != VK_SUCCESS) {
        b->buf = VK_NULL_HANDLE;
        goto fail;
    }
    VkMemoryRequirements req;
    g->fn.vkGetBufferMemoryRequirements(g->dev, b->buf, &req);
    const uint32_t mt = host ? g->mt_staging : g->mt_device;
    if (!(req.memoryTypeBits & (1u << mt))) {
        r = VK_ERROR_FEATURE_NOT_PRESENT;
        goto fail;
    }
    VkMemoryAllocateFlagsInfo fl = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                    .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .pNext = &fl,
                               .allocationSize = req.size,
                               .memoryTypeIndex = mt};
    if ((r = g->fn.vkAllocateMemory(g->dev, &ai, NULL, &b->mem)) != VK_SUCCESS) {
        b->mem = VK_NULL_HANDLE;
        goto fail;
    }
    if ((r = g->fn.vkBindBufferMemory(g->dev, b->buf, b->mem, 0)) != VK_SUCCESS)
        goto fail;
    if ((host || g->info.unified) &&
        (r = g->fn.vkMapMemory(g->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map)) != VK_SUCCESS)
        goto fail;
    VkBufferDeviceAddressInfo di = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                    .buffer = b->buf};
    b->addr = g->fn.vkGetBufferDeviceAddress(g->dev, &di);
    b->bytes = bytes;
    return b;
fail:
    err_set(err, err_len, "GPU memory: a buffer of %.1f MiB on \"%s\" failed: %s",
            (double)bytes / 1048576.0, g->info.name, vk_result_name(r));
    gpu_buf_free(g, b);
    return NULL;
}

struct gpu_buf *gpu_buf_new(struct gpu *g, size_t bytes, char *err, size_t err_len) {
    if (bytes == 0 || g->used_bytes + bytes > g->budget_bytes || fault_hit(FAULT_ALLOC)) {
        err_set(err, err_len, "GPU memory: %.1f MiB more would pass the budget (%.1f of %.1f MiB "
                "used)", (double)bytes / 1048576.0, (double)g->used_bytes / 1048576.0,
                (double)g->budget_bytes / 1048576.0);
        return NULL;
    }
    struct gpu_buf *b = buf_make(g, bytes, false, err, err_len);
    if (!b)
        return NULL;
    g->used_bytes += bytes;
    if (b->map) {
        memset(b->map, 0, bytes);
    } else if (gpu_begin(g) < 0 || (g->fn.vkCmdFillBuffer(g->cmd, b->buf, 0, VK_WHOLE_SIZE, 0),
                                    gpu_submit(g) < 0)) {
        err_set(err, err_len, "%s", g->err);
        gpu_buf_free(g, b);
        return NULL;
    }
    return b;
}

struct gpu_buf *gpu_buf_new_host(struct gpu *g, size_t bytes, char *err, size_t err_len) {
    struct gpu_buf *b = bytes ? buf_make(g, bytes, true, err, err_len) : NULL;
    if (!bytes)
        err_set(err, err_len, "GPU memory: a host buffer of 0 bytes");
    if (b) {
        b->host = true;
        memset(b->map, 0, bytes);
    }
    return b;
}

void *gpu_buf_host(const struct gpu_buf *b) {
    return b->map;
}

void gpu_buf_free(struct gpu *g, struct gpu_buf *b) {
    if (!b)
        return;
    if (b->map)
        g->fn.vkUnmapMemory(g->dev, b->mem);
    if (b->buf)
        g->fn.vkDestroyBuffer(g->dev, b->buf, NULL);
    if (b->mem)
        g->fn.vkFreeMemory(g->dev, b->mem, NULL);
    if (!b->host)
        g->used_bytes -= b->bytes;
    free(b);
}

uint64_t gpu_buf_addr(const struct gpu_buf *b) {
    return b->addr;
}

size_t gpu_buf_bytes(const struct gpu_buf *b) {
    return b->bytes;
}

/* Checks a host copy's range and state; returns 0 or an error with g->err set. */
static int copy_check(struct gpu *g, const struct gpu_buf *b, size_t off, size_t n) {
    if (g->lost)
        return -EIO;
    if (g->recording || off > b->bytes || n > b->bytes - off) {
        err_set(g->err, sizeof(g->err), "gpu: a copy of %zu bytes at %zu into a buffer of %zu%s",
                n, off, b->bytes, g->recording ? " while recording" : "");
        return -EINVAL;
    }
    return 0;
}

int gpu_buf_write(struct gpu *g, struct gpu_buf *b, size_t off, const void *src, size_t n) {
    int rc = copy_check(g, b, off, n);
    if (rc < 0 || n == 0)
        return rc;
    if (b->map) {
        memcpy((uint8_t *)b->map + off, src, n);
        return 0;
    }
    for (size_t done = 0; done < n && rc == 0;) {
        size_t part = n - done < GPU_STAGING_BYTES ? n - done : GPU_STAGING_BYTES;
        memcpy(g->staging->map, (const uint8_t *)src + done, part);
        if ((rc = gpu_begin(g)) < 0)
            break;
        gpu_copy(g, b, off + done, g->staging, 0, part);
        rc = gpu_submit(g);
        done += part;
    }
    return rc;
}

int gpu_buf_read(struct gpu *g, const struct gpu_buf *b, size_t off, void *dst, size_t n) {
    int rc = copy_check(g, b, off, n);
    if (rc < 0 || n == 0)
        return rc;
    if (b->map) {
        memcpy(dst, (const uint8_t *)b->map + off, n);
        return 0;
    }
    for (size_t done = 0; done < n && rc == 0;) {
        size_t part = n - done < GPU_STAGING_BYTES ? n - done : GPU_STAGING_BYTES;
        if ((rc = gpu_begin(g)) < 0)
            break;
        gpu_copy(g, g->staging, 0, b, off + done, part);
        if ((rc = gpu_submit(g)) == 0)
            memcpy((uint8_t *)dst + done, g->staging->map, part);
        done += part;
    }
    return rc;
}

/* ---- recording -------------------------------------------------------------------------------- */

int gpu_kernel(const struct gpu *g, const char *name) {
    for (int i = 0; i < gpu_spirv_count; i++)
        if (strcmp(gpu_spirv_table[i].name, name) == 0)
            return g->pipe && (!kernel_needs_int_dot(name) || g->info.int_dot) ? i : -1;
    return -1;
}

/* Waits for every command buffer sent. Returns 0 or -EIO (the device failed). */
/* Seconds a wait for the device polls its fence before it sleeps in the driver: a decode step's
 * last part, or a three-level exchange's layer, ends within this, and a sleeping thread wakes tens
 * of microseconds late. Not on a CPU device (lavapipe), whose threads need the CPU we would poll
 * on. */
#define GPU_FENCE_SPIN_S 5e-3

/* Waits for fence f: polls it first (GPU_FENCE_SPIN_S), then blocks. */
static VkResult fence_wait(struct gpu *g, VkFence f) {
    if (g->info.type != GPU_TYPE_CPU) {
        const double until = clock_now_s() + GPU_FENCE_SPIN_S;
        do {
            VkResult r = g->fn.vkGetFenceStatus(g->dev, f);
            if (r != VK_NOT_READY)
                return r;
            cpu_relax();
        } while (clock_now_s() < until);
    }
    return g->fn.vkWaitForFences(g->dev, 1, &f, VK_TRUE, UINT64_MAX);
}

static int ring_wait(struct gpu *g) {
    int rc = 0;
    for (int i = 0; i < GPU_RING; i++) {
        if (!g->ring_busy[i])
            continue;
        g->ring_busy[i] = false;
        VkResult r = fence_wait(g, g->ring_fence[i]);
        if (r != VK_SUCCESS && rc == 0)
            rc = fail_device(g, "vkWaitForFences", r);
    }
    return rc;
}

/* Makes ring slot i the recording's command buffer: waits for its last submission, resets and
 * begins it. Returns 0 or -EIO. */
static int ring_open(struct gpu *g, int i) {
    if (g->ring_busy[i]) {
        g->ring_busy[i] = false;
        VkResult r = fence_wait(g, g->ring_fence[i]);
        if (r != VK_SUCCESS)
            return fail_device(g, "vkWaitForFences", r);
    }
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    g->cmd = g->ring[i];
    VkResult r = g->fn.vkResetCommandBuffer(g->cmd, 0);
    if (r == VK_SUCCESS)
        r = g->fn.vkBeginCommandBuffer(g->cmd, &bi);
    if (r != VK_SUCCESS)
        return fail_device(g, "vkBeginCommandBuffer", r);
    return 0;
}

/* Ends the recording and submits it without waiting. Returns 0, the first recording error
 * (-EINVAL: nothing is submitted), or -EIO. */
static int ring_send(struct gpu *g) {
    if (g->lost)
        return -EIO;
    if (!g->recording) {
        err_set(g->err, sizeof(g->err), "gpu_submit: not recording");
        return -EINVAL;
    }
    g->recording = false;
    VkResult r = g->fn.vkEndCommandBuffer(g->cmd);
    if (r != VK_SUCCESS)
        return fail_device(g, "vkEndCommandBuffer", r);
    if (g->rec_rc < 0)
        return g->rec_rc;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &g->cmd};
    VkFence f = g->ring_fence[g->ring_cur];
    if (fault_hit(FAULT_GPU_LOST))
        return fail_device(g, "vkQueueSubmit", VK_ERROR_DEVICE_LOST);
    if ((r = g->fn.vkResetFences(g->dev, 1, &f)) != VK_SUCCESS ||
        (r = g->fn.vkQueueSubmit(g->queue, 1, &si, f)) != VK_SUCCESS)
        return fail_device(g, "vkQueueSubmit", r);
    g->ring_busy[g->ring_cur] = true;
    return 0;
}

int gpu_begin(struct gpu *g) {
    if (g->lost)
        return -EIO;
    if (g->recording) {
        err_set(g->err, sizeof(g->err), "gpu_begin: already recording");
        return -EINVAL;
    }
    int rc = ring_open(g, g->ring_cur);
    if (rc < 0)
        return rc;
    g->recording = true;
    g->unordered = false;
    g->rec_rc = 0;
    g->n_stamps = 0;
    if (g->stamps)
        g->fn.vkCmdResetQueryPool(g->cmd, g->stamps, 0, GPU_STAMPS);
    return 0;
}

int gpu_stamp(struct gpu *g) {
    if (!g->recording || !g->stamps || g->n_stamps == GPU_STAMPS)
        return -1;
    g->fn.vkCmdWriteTimestamp(g->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, g->stamps,
                              g->n_stamps);
    return (int)g->n_stamps++;
}

int gpu_stamps_read(struct gpu *g, double *ns, int max) {
    if (g->recording || !g->stamps || max <= 0)
        return -EINVAL;
    const int n = (int)g->n_stamps < max ? (int)g->n_stamps : max;
    uint64_t t[GPU_STAMPS];
    if (n > 0 && g->fn.vkGetQueryPoolResults(g->dev, g->stamps, 0, (uint32_t)n, sizeof(t), t,
                                             sizeof(uint64_t), VK_QUERY_RESULT_64_BIT) !=
                     VK_SUCCESS)
        return -EIO;
    for (int i = 0; i < n; i++)
        ns[i] = (double)(t[i] - t[0]) * g->stamp_ns;
    return n;
}

/* Keeps a recording error's message for gpu_submit. */
static void rec_fail(struct gpu *g, const char *msg) {
    if (g->rec_rc == 0) {
        g->rec_rc = -EINVAL;
        err_set(g->err, sizeof(g->err), "gpu: %s", msg);
    }
}

void gpu_dispatch(struct gpu *g, int k, const void *push, size_t push_bytes, uint32_t nx,
                  uint32_t ny, uint32_t nz) {
    if (!g->recording)
        return rec_fail(g, "a dispatch while not recording");
    if (k < 0 || k >= gpu_spirv_count || push_bytes > GPU_PUSH_MAX)
        return rec_fail(g, "a dispatch of an unknown kernel or with too many push constants");
    if (nx == 0 || ny == 0 || nz == 0)
        return; /* nothing to do */
    if (nx > g->info.max_groups[0] || ny > g->info.max_groups[1] || nz > g->info.max_groups[2])
        return rec_fail(g, "a dispatch of more workgroups than the device takes");
    if (!g->pipe[k] && pipeline_make(g, k) < 0) {
        char why[256];
        snprintf(why, sizeof(why), "%s", g->err);
        return rec_fail(g, why);
    }
    g->fn.vkCmdBindPipeline(g->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, g->pipe[k]);
    if (push_bytes)
        g->fn.vkCmdPushConstants(g->cmd, g->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                 (uint32_t)push_bytes, push);
    g->fn.vkCmdDispatch(g->cmd, nx, ny, nz);
    g->unordered = true;
    g->n_dispatch++;
}

bool gpu_barrier(struct gpu *g) {
    if (!g->recording) {
        rec_fail(g, "a barrier while not recording");
        return false;
    }
    if (!g->unordered) /* nothing since the last one: it would order nothing */
        return false;
    g->unordered = false;
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT |
                                           VK_ACCESS_TRANSFER_WRITE_BIT};
    const VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                    VK_PIPELINE_STAGE_TRANSFER_BIT;
    g->fn.vkCmdPipelineBarrier(g->cmd, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
    g->n_barrier++;
    return true;
}

void gpu_counts(const struct gpu *g, uint64_t *dispatches, uint64_t *barriers) {
    *dispatches = g->n_dispatch;
    *barriers = g->n_barrier;
}

void gpu_copy(struct gpu *g, struct gpu_buf *dst, size_t dst_off, const struct gpu_buf *src,
              size_t src_off, size_t n) {
    if (!g->recording)
        return rec_fail(g, "a copy while not recording");
    if (dst_off > dst->bytes || n > dst->bytes - dst_off || src_off > src->bytes ||
        n > src->bytes - src_off)
        return rec_fail(g, "a copy out of its buffers' range");
    VkBufferCopy c = {.srcOffset = src_off, .dstOffset = dst_off, .size = n};
    if (n) {
        g->fn.vkCmdCopyBuffer(g->cmd, src->buf, dst->buf, 1, &c);
        g->unordered = true;
    }
}

void gpu_zero(struct gpu *g, struct gpu_buf *b) {
    if (!g->recording)
        return rec_fail(g, "a fill while not recording");
    g->fn.vkCmdFillBuffer(g->cmd, b->buf, 0, VK_WHOLE_SIZE, 0);
}

int gpu_flush(struct gpu *g) {
    int rc = ring_send(g);
    if (rc < 0)
        return rc;
    g->ring_cur = (g->ring_cur + 1) % GPU_RING;
    if ((rc = ring_open(g, g->ring_cur)) < 0) {
        ring_wait(g);
        return rc;
    }
    g->recording = true;
    g->unordered = true; /* what was sent before must be ordered before what follows */
    gpu_barrier(g);
    return 0;
}

int gpu_submit(struct gpu *g) {
    int rc = ring_send(g);
    int wrc = ring_wait(g);
    return rc < 0 ? rc : wrc;
}
