// What `lab --version` prints and the detect JSON records: the lab's version and git commit, the NVRTC
// version and the compile target.
#pragma once
#include <string>

namespace lab {

std::string lab_version();  // "0.1.0"
// "lab 0.1.0 (commit 0123abcd4567)\nNVRTC 13.0\ntarget arch sm_90 (no CUDA device; --arch to change)"
std::string version_text(const std::string& arch_option);

}  // namespace lab
