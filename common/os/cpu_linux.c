/* cpu_linux.c - CPU facts on Linux (os.h): sched_getcpu, and the Arm extensions from the
 * kernel's hardware capabilities (getauxval). */
#include "os.h"

#include <sched.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

int os_cpu_current(void) {
    return sched_getcpu();
}

unsigned os_cpu_arm_features(void) {
    unsigned f = 0;
#if defined(__aarch64__)
    /* bit numbers of the arm64 ABI's AT_HWCAP / AT_HWCAP2 (asm/hwcap.h) */
    const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
    if (hwcap & (1ul << 20)) /* HWCAP_ASIMDDP */
        f |= OS_CPU_ARM_DOTPROD;
    if (hwcap2 & (1ul << 13)) /* HWCAP2_I8MM */
        f |= OS_CPU_ARM_I8MM;
#endif
    return f;
}
