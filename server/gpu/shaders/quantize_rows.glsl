// quantize_rows.glsl - the driver of the activation quantizers that work a block at a time: one
// invocation per block of QK_ELEMS floats of one row. A kernel defines QK_ELEMS, A_BLOCK_BYTES and
//     void quantize_block(F32s x, uint64_t blk)   QK_ELEMS floats at x -> one block at blk
// and then includes this.
layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t x;        // f32 rows, x_stride floats apart
    uint64_t dst;      // activation rows, dst_stride bytes apart
    uint x_stride;
    uint dst_stride;
    uint n_blocks;     // blocks per row
    uint n_rows;
} p;

void main() {
    uint b = gl_GlobalInvocationID.x, row = gl_GlobalInvocationID.y;
    if (b >= p.n_blocks || row >= p.n_rows)
        return;
    F32s x = F32s(p.x + (uint64_t(row) * p.x_stride + uint64_t(b) * QK_ELEMS) * 4u);
    quantize_block(x, p.dst + uint64_t(row) * p.dst_stride + uint64_t(b) * A_BLOCK_BYTES);
}
