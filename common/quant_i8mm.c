/* quant_i8mm.c - quant_neon.c compiled with Armv8.2's dot-product and Armv8.6's int8 matrix
 * multiply extensions (the Makefile adds -march=armv8.2-a+dotprod+i8mm here only): SDOT for the
 * one-row kernels, SMMLA for the two-row vec_dot_2xn of the quantized types. It registers as
 * "i8mm", chosen at run time where the CPU has FEAT_I8MM (os_cpu_arm_features). */
#if !defined(__ARM_FEATURE_MATMUL_INT8) || !defined(__ARM_FEATURE_DOTPROD)
#error "quant_i8mm.c wants -march=armv8.2-a+dotprod+i8mm (see the Makefile)"
#endif
#include "quant_neon.c"
