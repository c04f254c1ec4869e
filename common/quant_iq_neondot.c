/* quant_iq_neondot.c - quant_iq_neon.c compiled with Armv8.2's dot-product extension (the Makefile
 * adds -march=armv8.2-a+dotprod here only): its integer sums take SDOT, and it registers as
 * "neondot", chosen at run time where the CPU has FEAT_DotProd (os_cpu_arm_features). */
#if !defined(__ARM_FEATURE_DOTPROD)
#error "quant_iq_neondot.c wants -march=armv8.2-a+dotprod (see the Makefile)"
#endif
#include "quant_iq_neon.c"
