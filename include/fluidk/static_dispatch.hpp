// The static path of dispatch: with statically typed tensors, `run<Op>(target, inputs(...),
// outputs(...))` finds the kernel and each input's transform chain at compile time. With
// nothing to transform, the call is the kernel call. A missing kernel without a fallback is
// one static_assert naming the operator's situation, with no cascade after it.
#pragma once

#include <array>
#include <boost/hana/at_key.hpp>
#include <boost/hana/unpack.hpp>
#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fluidk/detail/pack.hpp"
#include "fluidk/operator.hpp"
#include "fluidk/transforms/static_chain.hpp"

namespace fluidk {

// Where a static call runs: a place kind with its device context, and the library the
// caller asks for (use oneDNN, use cuDNN).
template <class P, class Lib = library::plain>
class target {
  static_assert(Place<P> && Library<Lib>,
                "fluidk: target<Place, Library>: expects a place tag and a library tag");

 public:
  using place_t = P;
  using library_t = Lib;
  using context_type = typename device_traits<P>::context_type;

  explicit target(int device = 0) : context_(&context_of<P>(device)) {}
  explicit target(context_type& context) noexcept : context_(&context) {}

  context_type& context() const noexcept { return *context_; }
  int device() const noexcept { return context_->place().device(); }

 private:
  context_type* context_;
};

// An optional input left out of a static call: run<ops::fc>(t, inputs(x, w, no_input), ...).
// The kernel sees the slot empty, as on the runtime path.
struct no_input_t {
  explicit constexpr no_input_t() = default;
};
inline constexpr no_input_t no_input{};

template <class... T>
struct input_pack {
  detail::pack<const T&...> tensors;
};
template <class... T>
struct output_pack {
  std::array<Tensor*, sizeof...(T)> tensors;
};

// The inputs of a static call, typed tensors in the operator's slot order.
template <class... T>
input_pack<T...> inputs(const T&... t) noexcept {
  static_assert(
      ((is_typed_tensor<T> || std::is_same_v<T, no_input_t>)&&...),
      "fluidk: the static path takes typed_tensor inputs (or fluidk::no_input for an optional one)");
  return {{{t}...}};
}
// The outputs, tensors the kernel writes, in the operator's slot order.
template <class... T>
output_pack<T...> outputs(T&... t) noexcept {
  static_assert((std::is_same_v<T, Tensor> && ...), "fluidk: the static path takes Tensor& outputs");
  return {{&t...}};
}

namespace detail {

// The kernel types of an operator's map as an Mp11 list. (A function object rather than a
// lambda: g++ 12 mishandles lambdas in alias templates.)
struct keys_as_list {
  template <class... Key, class... K>
  constexpr auto operator()(const kernel_map_entry<Key, K>&...) const {
    return boost::mp11::mp_list<Key...>{};
  }
};
template <class Map>
struct map_keys {
  using type = decltype(boost::hana::unpack(std::declval<const Map&>(), keys_as_list{}));
};
// Read off the type of the map make_kernels builds, without instantiating unpack.
template <class HashTable, class... Key, class... K>
struct map_keys<
    boost::hana::detail::map_impl<HashTable, boost::hana::basic_tuple<kernel_map_entry<Key, K>...>>> {
  using type = boost::mp11::mp_list<Key...>;
};
template <class Op>
using kernel_keys_of = typename map_keys<std::remove_cvref_t<decltype(Op::kernels)>>::type;

template <class P, class T, class Lib>
struct same_except_layout {
  template <class Key>
  using fn = std::bool_constant<std::is_same_v<typename Key::place_t, P> &&
                                std::is_same_v<typename Key::dtype_t, T> &&
                                std::is_same_v<typename Key::library_t, Lib>>;
};

// The kernel for (P, T, Lib): the exact key with ANY_LAYOUT; else one declared for a concrete
// layout, preferring the layout the first input is already in; else void.
template <class Keys, class P, class T, class Lib, class PreferredLayout>
struct find_concrete_layout_kernel {
  using candidates = boost::mp11::mp_copy_if_q<Keys, same_except_layout<P, T, Lib>>;
  using preferred = kernel_type<P, T, PreferredLayout, Lib>;
  using type = std::conditional_t<boost::mp11::mp_contains<candidates, preferred>::value, preferred,
                                  boost::mp11::mp_eval_if_c<boost::mp11::mp_empty<candidates>::value, void,
                                                            boost::mp11::mp_front, candidates>>;
};

// The kernel for (P, T, Lib): the exact key with ANY_LAYOUT; else one declared for a concrete
// layout, preferring the layout the first input is already in; else void. Each step is only
// computed when the one before found nothing (compile time is part of the interface).
template <class Keys, class P, class T, class Lib, class PreferredLayout>
struct find_kernel_key {
  using exact = kernel_type<P, T, layout::any, Lib>;
  using type =
      typename boost::mp11::mp_if<boost::mp11::mp_contains<Keys, exact>, std::type_identity<exact>,
                                  find_concrete_layout_kernel<Keys, P, T, Lib, PreferredLayout>>::type;
};

template <class Selection>
struct fallback_kernel_key {
  using keys = typename Selection::keys;
  using dtype = typename Selection::dtype;
  using preferred = typename Selection::preferred_layout;
  // The plain kernel on the same place (from oneDNN or cuDNN), then the CPU kernel of the
  // library asked for, then the CPU's plain kernel.
  using plain =
      typename find_kernel_key<keys, typename Selection::place_t, dtype, library::plain, preferred>::type;
  using on_cpu = typename boost::mp11::mp_if_c<
      std::is_void_v<plain>, find_kernel_key<keys, cpu, dtype, typename Selection::library_t, preferred>,
      std::type_identity<plain>>::type;
  using type = typename boost::mp11::mp_if_c<std::is_void_v<on_cpu>,
                                             find_kernel_key<keys, cpu, dtype, library::plain, preferred>,
                                             std::type_identity<on_cpu>>::type;
};

// The place an operator runs on: its `run_on` when it declares one, else the caller's.
template <class Op, class Default>
struct run_on_of {
  using type = Default;
};
template <class Op, class Default>
requires requires { typename Op::run_on; }
struct run_on_of<Op, Default> {
  using type = typename Op::run_on;
};

template <class In>
struct input_traits {
  using dtype_t = typename In::dtype_t;
  using layout_t = typename In::layout_t;
};
template <>
struct input_traits<no_input_t> {
  using dtype_t = void;
  using layout_t = layout::any;
};

// The data type of a static call: the deciding input's, else the one all given inputs share
// (float when none is given).
template <std::size_t Decider, class All, class Given,
          bool Named = (Decider < boost::mp11::mp_size<All>::value)>
struct deciding_dtype {
  using type = boost::mp11::mp_at_c<All, Decider>;
};
template <std::size_t Decider, class All, class Given>
struct deciding_dtype<Decider, All, Given, false> {
  using type =
      boost::mp11::mp_eval_if_c<boost::mp11::mp_empty<Given>::value, float, boost::mp11::mp_front, Given>;
};

template <class Op, class Target, class... In>
struct static_selection {
  using keys = kernel_keys_of<Op>;
  // Each input's data type and layout; void and ANY for an input left out (no_input).
  using all_dtypes = boost::mp11::mp_list<typename input_traits<In>::dtype_t...>;
  using input_dtypes = boost::mp11::mp_remove<all_dtypes, void>;
  static constexpr std::size_t decider = data_type_input_index<Op>();
  static constexpr bool inputs_agree =
      decider < sizeof...(In) || boost::mp11::mp_size<boost::mp11::mp_unique<input_dtypes>>::value <= 1;
  static_assert(
      inputs_agree,
      "fluidk: the inputs of this operator disagree on the data type; name the input that decides with "
      "`static constexpr std::string_view data_type_input = ...;` (see the input types above)");

  using dtype = typename deciding_dtype<decider, all_dtypes, input_dtypes>::type;
  static_assert(!std::is_void_v<dtype>,
                "fluidk: the input that decides this operator's data type (data_type_input) is left out");
  using place_t = typename run_on_of<Op, typename Target::place_t>::type;
  using library_t = typename Target::library_t;
  using preferred_layout =
      boost::mp11::mp_eval_if_c<sizeof...(In) == 0, layout::any, boost::mp11::mp_front,
                                boost::mp11::mp_list<typename input_traits<In>::layout_t...>>;

  // (Nothing is looked up without a data type: the assertion above is the one error.)
  using expected =
      typename boost::mp11::mp_if_c<std::is_void_v<dtype>, std::type_identity<void>,
                                    find_kernel_key<keys, place_t, dtype, library_t, preferred_layout>>::type;
  static constexpr bool may_fall_back = fallback_of<Op>() == fallback_policy::cpu && !std::is_void_v<dtype>;
  using chosen = typename boost::mp11::mp_if_c<std::is_void_v<expected> && may_fall_back,
                                               fallback_kernel_key<static_selection>,
                                               std::type_identity<expected>>::type;
  static constexpr bool fell_back = std::is_void_v<expected> && !std::is_void_v<chosen>;
};

// Instantiated only when no kernel can serve a static call; its template arguments (the
// operator, the expected kernel type and the registered ones) appear in the compiler's
// "in instantiation of" line right above the message.
template <class Op, class Expected, class Registered>
struct no_kernel {
  static_assert(sizeof(Op) == 0,
                "fluidk: operator has no kernel for the expected kernel type and no fallback policy allows "
                "another (the operator, the expected kernel type and the registered ones are in the "
                "instantiation above)");
};

// Per-slot flags of an operator's inputs as bit masks, so that the code preparing inputs
// depends on the kernel type and the flags only, and is shared between operators.
template <class Op, bool (*Flag)(std::string_view)>
constexpr std::uint64_t input_mask() {
  std::uint64_t mask = 0;
  for (std::size_t i = 0; i < Op::inputs.size(); ++i)
    if (Flag(Op::inputs[i])) mask |= std::uint64_t(1) << i;
  return mask;
}

// The kernel type an input is transformed to: the kernel's place and layout, its own data
// type unless the operator asks to cast it, its own layout when the operator keeps it. An
// exempt input is not transformed at all.
template <class Kernel, bool Cast, bool KeepLayout, class In>
using input_target =
    kernel_type<typename Kernel::place_t,
                std::conditional_t<Cast, typename Kernel::dtype_t, typename In::dtype_t>,
                std::conditional_t<KeepLayout, typename In::layout_t, typename Kernel::layout_t>>;

// One input of a static call as the kernel needs it. When the compile-time chain is empty
// and no device can differ, the kernel reads the caller's tensor itself: no copy, not even
// of the handle, so that such a call costs what calling the kernel directly costs.
template <class Kernel, bool Exempt, bool Cast, bool KeepLayout, class In>
class prepared_input {
  using target = input_target<Kernel, Cast, KeepLayout, In>;
  using chain =
      transform_chain<kernel_type<typename In::place_t, typename In::dtype_t, typename In::layout_t>, target>;
  static constexpr bool pass_through =
      Exempt ||
      (boost::mp11::mp_empty<chain>::value && !Kernel::place_t::has_device_id &&
       planning::effective_source_layout(
           In::layout_t::value, planning::effective_target_layout(
                                    In::layout_t::value, target::layout_t::value)) == In::layout_t::value);

 public:
  [[gnu::always_inline]] prepared_input(const In& in, int device) {
    if constexpr (pass_through)
      held_ = &in.tensor();
    else
      held_ = fluidk::transform<target>(in, device).tensor();
  }
  // Computed on each call rather than stored, so that the object may be copied or moved.
  const Tensor* get() const noexcept {
    if constexpr (pass_through)
      return held_;
    else
      return &held_;
  }

 private:
  std::conditional_t<pass_through, const Tensor*, Tensor> held_;
};

// An input left out: the kernel's argument is empty.
template <class Kernel, bool Exempt, bool Cast, bool KeepLayout>
class prepared_input<Kernel, Exempt, Cast, KeepLayout, no_input_t> {
 public:
  [[gnu::always_inline]] prepared_input(const no_input_t&, int) noexcept {}
  const Tensor* get() const noexcept { return nullptr; }
};

template <class Kernel, class Target>
[[gnu::always_inline]] inline auto& kernel_context(const Target& t) {
  using P = typename Kernel::place_t;
  if constexpr (std::is_same_v<P, typename Target::place_t>)
    return t.context();
  else
    return context_of<P>(0);  // a fallback or forced place: device 0 of that kind
}

// Slot s holds argument s: the offsets 0, 1, ..., N.
template <std::size_t N>
inline constexpr auto one_per_slot = [] {
  std::array<std::uint32_t, N + 1> offsets{};
  for (std::uint32_t i = 0; i <= N; ++i) offsets[i] = i;
  return offsets;
}();

// The dispatch code is forced inline: a static call must cost what the direct call costs,
// and left to itself the compiler outlines it behind a call and argument stores.
#define FLUIDK_DETAIL_INLINE [[gnu::always_inline]] inline
#define FLUIDK_DETAIL_LAMBDA_INLINE __attribute__((always_inline))

template <class Key, class K, std::size_t N, class... Out>
FLUIDK_DETAIL_INLINE void invoke_prepared(const K& kernel, device_context& device, int device_id,
                                          std::array<kernel_arg, N>& input_args,
                                          const output_pack<Out...>& out, const attribute_map& attrs,
                                          std::string_view op, std::span<const std::string_view> input_names,
                                          std::span<const std::string_view> output_names) {
  std::array<kernel_arg, sizeof...(Out)> output_args;
  for (std::size_t i = 0; i < sizeof...(Out); ++i) output_args[i] = kernel_arg(out.tensors[i]);
  execution_context context(op, input_names, output_names, device, Key::key(device_id),
                            {input_args, one_per_slot<N>}, {output_args, one_per_slot<sizeof...(Out)>},
                            attrs);
  kernel(context);
}

template <class Key, std::uint64_t NoTransform, std::uint64_t Cast, std::uint64_t KeepLayout, class K,
          class Target, class... In, class... Out>
FLUIDK_DETAIL_INLINE void invoke_static(const K& kernel, const Target& t, const input_pack<In...>& in,
                                        const output_pack<Out...>& out, const attribute_map& attrs,
                                        std::string_view op, std::span<const std::string_view> input_names,
                                        std::span<const std::string_view> output_names) {
  auto& device = kernel_context<Key>(t);
  const int device_id = device.place().device();
  [&]<std::size_t... I>(std::index_sequence<I...>) FLUIDK_DETAIL_LAMBDA_INLINE {
    detail::pack<prepared_input<Key, ((NoTransform >> I) & 1) != 0, ((Cast >> I) & 1) != 0,
                                ((KeepLayout >> I) & 1) != 0, In>...>
        prepared{{{detail::pack_get<I>(in.tensors), device_id}}...};
    std::array<kernel_arg, sizeof...(In)> input_args{kernel_arg(detail::pack_get<I>(prepared).get())...};
    invoke_prepared<Key>(kernel, device, device_id, input_args, out, attrs, op, input_names, output_names);
  }
  (std::index_sequence_for<In...>{});
}

}  // namespace detail

// The kernel type run<Op> would choose for these typed inputs on this target (void when
// there is none).
template <class Op, class Target, class... In>
using static_kernel_type = typename detail::static_selection<Op, Target, In...>::chosen;

template <class Op, class Target, class... In, class... Out>
FLUIDK_DETAIL_INLINE void run(const Target& t, const input_pack<In...>& in, const output_pack<Out...>& out,
                              const attribute_map& attrs = detail::empty_attributes) {
  static_assert(detail::operator_check<Op>::value);
  static_assert(sizeof...(In) == Op::inputs.size(),
                "fluidk: run<Op>: give one input per input slot of the operator");
  static_assert(sizeof...(Out) == Op::outputs.size(),
                "fluidk: run<Op>: give one output per output slot of the operator");
  using selection = detail::static_selection<Op, Target, In...>;
  using chosen = typename selection::chosen;
  if constexpr (std::is_void_v<typename selection::dtype>) {
    // The deciding input is left out: static_selection's assertion has said so.
  } else if constexpr (std::is_void_v<chosen>) {
    (void)sizeof(detail::no_kernel<Op,
                                   kernel_type<typename selection::place_t, typename selection::dtype,
                                               layout::any, typename Target::library_t>,
                                   typename selection::keys>);
  } else {
    const auto& kernel = boost::hana::at_key(Op::kernels, boost::hana::type_c<chosen>);
    static_assert(Kernel<std::remove_cvref_t<decltype(kernel)>>,
                  "fluidk: a kernel must be callable as kernel(execution_context&) on a const object");
    detail::invoke_static<chosen, detail::input_mask<Op, no_transform_input<Op>>(),
                          detail::input_mask<Op, cast_input<Op>>(),
                          detail::input_mask<Op, keep_layout_input<Op>>()>(kernel, t, in, out, attrs,
                                                                           Op::name, Op::inputs, Op::outputs);
  }
}

}  // namespace fluidk

#undef FLUIDK_DETAIL_INLINE
#undef FLUIDK_DETAIL_LAMBDA_INLINE
