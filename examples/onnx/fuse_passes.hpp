// Fuse passes: rewrites of an imported model's program (block 0) and weights before it runs,
// as Paddle Inference's fuse passes do, so that a convolution or a gemm and what follows it run
// as one operator (one oneDNN primitive with post-ops). Each pass is named, runs on its own, and
// says how many fusions it made; run-onnx runs them all by default (--no-fuse switches one off).
//
//   conv_bn          conv2d, then batch_norm (is_test) on its output: the statistics folded
//                    into a new Filter and Bias (computed in double, rounded to float)
//   conv_bias        conv2d, then elementwise_add of a persistable bias per output channel
//                    (the importer's Conv bias B): conv2d's Bias
//   conv_residual    conv2d, then elementwise_add of its output and a value of the same dims
//                    computed before the conv (or a graph input): conv2d's ResidualData
//   conv_activation  conv2d, then relu, clip or sigmoid: conv2d's fuse_activation
//   gemm_activation  gemm, then relu, clip or sigmoid: gemm's fuse_activation
//
// A pass fuses an operator with the one after it only where the first one's output has no other
// reader and is no graph output, and both run at the same place with the same library
// (op_device, use_onednn, use_cudnn). The fused operator writes the second one's output, keeps
// the first one's attributes and names both nodes in its origin. Variables no operator uses any
// more leave block 0, and weights no operator reads leave the model (a graph output stays).
#pragma once

#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "importer.hpp"

namespace fluidk::onnx_import {

// The passes' names, in the order fuse runs them.
const std::vector<std::string>& fuse_pass_names();

// Runs pass `name` on the model; returns the number of fusions it made. An unknown name is an
// error listing the names.
std::size_t run_fuse_pass(imported_model& model, std::string_view name);

// One pass of fuse: its name, whether it ran, and the fusions it made.
struct fuse_report {
  std::string pass;
  bool ran = false;
  std::size_t fused = 0;
};

// Runs every pass whose name `off` does not hold, in the order of fuse_pass_names ("all" in
// `off` switches every pass off); a report per pass, in that order.
std::vector<fuse_report> fuse(imported_model& model, const std::set<std::string, std::less<>>& off);

// The layout of the activations of oneDNN's convolutions: conv2d's attribute onednn_layout
// ("blocked" or "NHWC"), which its oneDNN kernel reads where Input is NCHW (the network's first
// convolution; the next ones keep the layout it gives them), set on every conv2d of block 0.
// `mode` "blocked" or "NHWC" sets it; "auto" chooses NHWC where `nhwc_convolutions` (oneDNN runs
// its brgemm-based NHWC convolutions on this CPU: AVX-512), every conv2d of block 0 is
// ungrouped, and only conv2d, pool2d, flatten2 and reshape2 read the outputs of its conv2d and
// pool2d operators (as in ResNet after the fuse passes), else blocked. oneDNN 2.6's NHWC
// convolutions are faster on ResNet's plain convolutions; its depthwise ones are slower than
// the blocked ones, a concatenation of channels is a strided copy in NHWC, and some of the
// example operators' other oneDNN kernels write NCHW for an NHWC input (docs/onnx.md). With
// no conv2d in block 0, nothing is set (the layout reported: `mode`, or blocked for auto).
struct layout_choice {
  std::string layout;  // "blocked" or "NHWC"
  std::string why;     // "given", or auto's reason
};
// Whether `mode` is one choose_onednn_layout takes: auto, blocked or NHWC.
bool onednn_layout_mode(std::string_view mode);
layout_choice choose_onednn_layout(imported_model& model, std::string_view mode, bool nhwc_convolutions);

}  // namespace fluidk::onnx_import
