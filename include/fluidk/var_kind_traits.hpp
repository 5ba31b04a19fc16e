// Variable kinds at compile time, for statically typed graphs: a tag type per kind and the
// InferVarType rules of the runtime path (fluidk/program.hpp) as type functions, with the
// same results. A rule that rejects its inputs fails with one static_assert that names it.
//
//   using out = fluidk::sum_output_kind<fluidk::kinds::lod_tensor, fluidk::kinds::selected_rows>;
//   static_assert(out::value == fluidk::var_kind::lod_tensor);
#pragma once

#include <concepts>
#include <type_traits>

#include "fluidk/variable.hpp"

namespace fluidk {

namespace kinds {
// A dense tensor with sequence offsets.
struct lod_tensor {
  static constexpr var_kind value = var_kind::lod_tensor;
};
// Rows of a tall matrix (sparse gradients).
struct selected_rows {
  static constexpr var_kind value = var_kind::selected_rows;
};
// A list of LoDTensors (loop state).
struct lod_tensor_array {
  static constexpr var_kind value = var_kind::lod_tensor_array;
};
}  // namespace kinds

// One of the kind tags.
template <class T>
concept VarKindTag = std::same_as<T, kinds::lod_tensor> || std::same_as<T, kinds::selected_rows> ||
    std::same_as<T, kinds::lod_tensor_array>;

namespace detail {
// Checks in a function rather than in the class, so that a failure is one error with Clang
// too (see check_sum_inputs below).
template <var_kind K>
constexpr bool check_kind_tag() {
  static_assert(K != var_kind::empty, "fluidk: kind_tag: an empty variable has no kind tag");
  return true;
}

template <bool Checked, class T>
using after_check = T;

template <var_kind K>
struct kind_tag_of {
  using type = after_check<check_kind_tag<K>(), kinds::lod_tensor>;
};
template <>
struct kind_tag_of<var_kind::selected_rows> {
  using type = kinds::selected_rows;
};
template <>
struct kind_tag_of<var_kind::lod_tensor_array> {
  using type = kinds::lod_tensor_array;
};
}  // namespace detail

// The tag of a runtime kind known at compile time: kind_tag<var_kind::selected_rows>.
template <var_kind K>
using kind_tag = typename detail::kind_tag_of<K>::type;

namespace detail {
// The checks of the sum rule. They sit in a function, not in the class that computes the
// kind: Clang makes a class whose static_assert fails unusable, which would add a second
// error at every use of it. At most one of them fires.
template <class... In>
constexpr bool check_sum_inputs() {
  constexpr bool tags = (VarKindTag<In> && ...);
  constexpr bool any_array = (std::is_same_v<In, kinds::lod_tensor_array> || ...);
  constexpr bool all_array = (std::is_same_v<In, kinds::lod_tensor_array> && ...);
  static_assert(sizeof...(In) > 0, "fluidk: sum: needs at least one input");
  static_assert(tags,
                "fluidk: sum: every input kind must be fluidk::kinds::lod_tensor, selected_rows or "
                "lod_tensor_array");
  static_assert(!tags || !any_array || all_array,
                "fluidk: sum: if any input is a LoDTensorArray, all must be");
  return true;
}

template <class... In>
struct sum_output_kind_impl {
  static constexpr bool any_array = (std::is_same_v<In, kinds::lod_tensor_array> || ...);
  static constexpr bool any_dense = (std::is_same_v<In, kinds::lod_tensor> || ...);
  using type =
      after_check<check_sum_inputs<In...>(),
                  std::conditional_t<any_array, kinds::lod_tensor_array,
                                     std::conditional_t<any_dense, kinds::lod_tensor, kinds::selected_rows>>>;
};
}  // namespace detail

// sum: a LoDTensorArray when the inputs are (all of them must be, if any is); else a
// LoDTensor when any input is one; else SelectedRows.
template <class... In>
using sum_output_kind = typename detail::sum_output_kind_impl<In...>::type;

// lookup_table_grad: the weight gradient is SelectedRows when the lookup is sparse.
template <bool IsSparse>
using lookup_table_grad_output_kind = std::conditional_t<IsSparse, kinds::selected_rows, kinds::lod_tensor>;

// The default rule: every output is a dense LoDTensor.
template <class... In>
using default_output_kind = kinds::lod_tensor;

// The rules as quoted type functions (Mp11 style: Rule::fn<In...>), for generic code.
namespace rules {
struct dense {
  template <class... In>
  using fn = default_output_kind<In...>;
};
struct sum {
  template <class... In>
  using fn = sum_output_kind<In...>;
};
template <bool IsSparse>
struct lookup_table_grad {
  template <class... In>
  using fn = lookup_table_grad_output_kind<IsSparse>;
};
}  // namespace rules

// The output kind a rule gives for these input kinds: infer_output_kind<rules::sum, In...>.
template <class Rule, class... In>
using infer_output_kind = typename Rule::template fn<In...>;

}  // namespace fluidk
