// engine/ops/conv/conv_table.c: the conv family's CPU table (registered through
// engine/ops/families.h): conv.c's ops, col2im.c's and qconv.c's. Apart from
// conv.c so that qconv.c, which builds on conv.c's parser and window, and
// conv.c never call each other (tests/unit/check_circles.py).
#include "engine/ops/conv/conv.h"
#include "engine/ops/ops_common.h"

const eng_op_def eng_ops__conv[] = {
    {"LpPool", 1, 1, 1, 1, 0, eng_ops__parse_lppool, eng_ops__infer_lppool, eng_ops__run_lppool, 0, NULL, NULL},
    {"Col2Im", 3, 3, 1, 1, 0, op_parse_node, eng_ops__infer_col2im, eng_ops__run_col2im,
     ENG_IN(1) | ENG_IN(2), NULL, NULL},
    {"MaxUnpool", 2, 3, 1, 1, 0, op_parse_node, eng_ops__infer_max_unpool, eng_ops__run_max_unpool, ENG_IN(2), NULL,
     NULL},
    {"CausalConvWithState", 2, 4, 1, 2, 0, eng_ops__parse_causal_conv, eng_ops__infer_causal_conv,
     eng_ops__run_causal_conv, 0, NULL, NULL},
    {"Conv", 2, 3, 1, 1, 0, eng_conv_parse, eng_conv_infer, eng_conv_run_ref, 0, eng_conv_run,
     eng_conv_state_destroy},
    {"QLinearConv", 8, 9, 1, 1, 0, eng_qconv_parse, eng_qconv_infer, eng_qconv_run_ref, 0, eng_qconv_run,
     eng_qconv_state_destroy},
    {"ConvInteger", 2, 4, 1, 1, 0, eng_qconv_parse, eng_qconv_infer, eng_qconv_run_ref, 0, eng_qconv_run,
     eng_qconv_state_destroy},
    {"ConvTranspose", 2, 3, 1, 1, 0, eng_conv_parse, eng_conv_infer, eng_conv_run_ref, 0,
     eng_conv_run, eng_conv_state_destroy},
    {"MaxPool", 1, 1, 1, 2, 0, eng_conv_parse, eng_conv_infer, eng_conv_run_ref, 0, eng_conv_run,
     eng_conv_state_destroy},
    {"AveragePool", 1, 1, 1, 1, 0, eng_conv_parse, eng_conv_infer, eng_conv_run_ref, 0,
     eng_conv_run, eng_conv_state_destroy},
    {"GlobalAveragePool", 1, 1, 1, 1, 0, eng_conv_parse, eng_conv_infer, eng_conv_run_ref, 0,
     eng_conv_run, eng_conv_state_destroy},
    {"GlobalMaxPool", 1, 1, 1, 1, 0, eng_conv_parse, eng_conv_infer, eng_conv_run_ref, 0,
     eng_conv_run, eng_conv_state_destroy},
};
const size_t eng_ops__n_conv = sizeof eng_ops__conv / sizeof eng_ops__conv[0];
