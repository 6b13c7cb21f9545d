/* The kernels of nn_conv_gray.c, compiled once per ISA as separate objects
 * (models/CMakeLists.txt: nn_conv_gray_kernels.c with that ISA's -m flags
 * and vector width NN_VL), so that each works on vectors its registers
 * really hold. Internal to models/. */
#ifndef COHORT_NN_CONV_GRAY_KERNELS_H
#define COHORT_NN_CONV_GRAY_KERNELS_H

#include <stdbool.h>

enum { GRAY_K = 5, GRAY_PAD = 2, GRAY_TAPS = GRAY_K * GRAY_K };

/* Output pixels of row y for one group of channels: bias, the taps in
 * order, then the ReLU when relu. pad is the image with GRAY_PAD zeros on
 * every side, pw floats per row; wt the group's weights, [tap][group];
 * bias and out start at the group's first channel, out's pixels co floats
 * apart. */
typedef void (*gray_fwd_row_fn)(const float *pad, int pw, int y, int w,
                                const float *wt, const float *bias, float *out,
                                int co, bool relu);
/* dwt[t][0..lanes) (tap stride co) += sum over the image's pixels of
 * pad[pixel + tap t] * dout[pixel][0..lanes) for the channels at dout (row
 * stride co), and db[0..lanes) += the sum of dout over the pixels. */
typedef void (*gray_wgrad_fn)(const float *pad, int pw, int h, int w,
                              const float *dout, int co, float *dwt, float *db);

/* One ISA's kernels: the forward takes group channels at a time (a few
 * vectors), the weight gradient lanes (one vector). */
typedef struct gray_arch {
  int group, lanes;
  gray_fwd_row_fn fwd_row;
  gray_wgrad_fn wgrad;
} gray_arch;

/* One per build of nn_conv_gray_kernels.c (scalar: every build). */
extern const gray_arch nn_gray_arch_avx512, nn_gray_arch_avx2,
    nn_gray_arch_sse2, nn_gray_arch_generic, nn_gray_arch_scalar;

#endif
