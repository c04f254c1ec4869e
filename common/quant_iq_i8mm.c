/* quant_iq_i8mm.c - quant_iq_neon.c compiled with the dot-product and int8 matrix multiply
 * extensions (the Makefile adds -march=armv8.2-a+dotprod+i8mm here only): SDOT for the one-row
 * kernels, SMMLA for vec_dot_2xn; it registers as "i8mm", chosen at run time where the CPU has
 * FEAT_I8MM (os_cpu_arm_features). */
#if !defined(__ARM_FEATURE_MATMUL_INT8) || !defined(__ARM_FEATURE_DOTPROD)
#error "quant_iq_i8mm.c wants -march=armv8.2-a+dotprod+i8mm (see the Makefile)"
#endif
#include "quant_iq_neon.c"
