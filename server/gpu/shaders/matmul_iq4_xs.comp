// matmul_iq4_xs.comp - IQ4_XS's product (blocks_iq4_xs.glsl's terms) on matmul_split.glsl: decode.
#version 450
#include "common.glsl"
#include "blocks_iq4_xs.glsl"
#include "matmul_split.glsl"
