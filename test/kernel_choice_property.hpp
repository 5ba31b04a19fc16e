// The kernel-choice property test, split in two translation units that compile in
// parallel: kernel_choice_property_decls.cpp generates the operator declarations and their
// static picks; kernel_choice_property_test.cpp runs every request through the runtime call
// and the executor and compares.
#pragma once

#include <cstddef>
#include <fluidk/runtime_dispatch.hpp>
#include <vector>

namespace fluidk_test::property {

inline constexpr std::size_t key_count = 24;          // 2 places x 2 types x 3 layouts x 2 libraries
inline constexpr std::size_t declaration_count = 72;  // generated operator declarations
inline constexpr std::size_t request_count = 12 * 3 * 2 * 2 * 3;  // X x Label x place x library x policy

// The universe index of the kernel that ran last (each probe kernel writes its own).
inline thread_local std::size_t ran = key_count;

// A registered declaration and its static outcome for each request: the universe index of
// the chosen kernel, or key_count + the selection_status when none is chosen.
struct declared {
  const fluidk::operator_info* info;
  std::vector<std::size_t> statics;
};
std::vector<declared> declarations();

}  // namespace fluidk_test::property
