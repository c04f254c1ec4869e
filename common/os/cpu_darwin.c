/* cpu_darwin.c - CPU facts on macOS (os.h): no current-CPU call; the Arm extensions from sysctl's
 * hw.optional.arm.FEAT_* keys (every Apple Silicon CPU has DotProd; I8MM from the M2 on). */
#include "os.h"

#include <sys/sysctl.h>
#include <sys/types.h>

int os_cpu_current(void) {
    return -1;
}

/* sysctl key name as a bool (false where the key is absent: an older macOS or an Intel Mac). */
static bool cpu_sysctl_flag(const char *name) {
    int v = 0;
    size_t n = sizeof(v);
    return sysctlbyname(name, &v, &n, NULL, 0) == 0 && v != 0;
}

unsigned os_cpu_arm_features(void) {
    unsigned f = 0;
    if (cpu_sysctl_flag("hw.optional.arm.FEAT_DotProd"))
        f |= OS_CPU_ARM_DOTPROD;
    if (cpu_sysctl_flag("hw.optional.arm.FEAT_I8MM"))
        f |= OS_CPU_ARM_I8MM;
    return f;
}
