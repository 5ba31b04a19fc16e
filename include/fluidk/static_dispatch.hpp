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
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fluidk/detail/error_context.hpp"
#include "fluidk/detail/fallback_log.hpp"
#include "fluidk/detail/pack.hpp"
#include "fluidk/detail/request_attributes.hpp"
#include "fluidk/operator.hpp"
// With the CPU's transforms, a call whose inputs need a layout change or a cast on the CPU
// works with this header alone.
#include "fluidk/transforms/cpu.hpp"
#include "fluidk/transforms/static_chain.hpp"

namespace fluidk {

// A static target's fallback policy: the operator's own (the default), or one that
// replaces it for the call, as operator_registry::set_global_fallback does at run time.
struct operator_fallback {
  static constexpr std::optional<fallback_policy> value{};
};
template <fallback_policy Policy>
struct with_fallback {
  static constexpr std::optional<fallback_policy> value{Policy};
};

// Where a static call runs: a place kind with its device context, the library the caller
// asks for (use oneDNN, use cuDNN), and optionally a fallback policy for the call.
template <class P, class Lib = library::plain, class Fallback = operator_fallback>
class target {
  static_assert(Place<P> && Library<Lib>,
                "fluidk: target<Place, Library>: expects a place tag and a library tag");

 public:
  using place_t = P;
  using library_t = Lib;
  using fallback_t = Fallback;
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

// The key of a typed input's data (on device 0: the device is known only at run time).
template <class In>
constexpr kernel_key static_input_key() noexcept {
  return kernel_type<typename In::place_t, typename In::dtype_t, typename In::layout_t>::key();
}

// The inputs of a static call as the rules see them: one input_state per input given, in
// slot order (an input left out with no_input is not listed).
template <class... In>
struct static_inputs {
  static constexpr std::size_t count = (std::size_t(!std::is_same_v<In, no_input_t>) + ... + 0);
  static constexpr std::array<input_state, count> make() {
    std::array<input_state, count> out{};
    [[maybe_unused]] std::size_t n = 0;
    [[maybe_unused]] std::uint32_t slot = 0;
    (
        [&] {
          if constexpr (!std::is_same_v<In, no_input_t>) out[n++] = {slot, static_input_key<In>()};
          ++slot;
        }(),
        ...);
    return out;
  }
  static constexpr std::array<input_state, count> value = make();
};

template <class Target, class Dt>
constexpr selection_request static_request() noexcept {
  selection_request r;
  r.executor_place = place::of<typename Target::place_t>(0);
  r.library = library_type_of<typename Target::library_t>;
  if constexpr (!std::is_void_v<Dt>) r.attribute_dtype = data_type_of<Dt>;
  r.policy = Target::fallback_t::value;
  return r;
}

template <class Op, class Target, class Dt, class... In>
constexpr selection static_select() noexcept {
  static_assert(std::is_void_v<Dt> || DType<Dt>,
                "fluidk: run<Op, DType>: the data type is not one of fluidk's data types");
  return select_kernel(rules_of<Op>, static_inputs<In...>::value, static_request<Target, Dt>());
}

// The layout of an input's type; ANY_LAYOUT for no_input.
template <class In>
struct input_layout {
  using type = layout::any;
};
template <class In>
requires requires { typename In::layout_t; }
struct input_layout<In> {
  using type = typename In::layout_t;
};

// The kernel type of the key a chosen index names; void for none.
template <class Op, std::size_t Index>
struct chosen_type {
  using type = boost::mp11::mp_at_c<kernel_keys_of<Op>, Index>;
};
template <class Op>
struct chosen_type<Op, selection_rules::none> {
  using type = void;
};

// The place tag among Candidates whose kind id is Id (the rule chose the place; this only
// names its type).
template <place_kind_id Id, class... Candidates>
struct place_type_of;
template <place_kind_id Id, class P, class... Rest>
struct place_type_of<Id, P, Rest...> {
  using type =
      typename std::conditional_t<P::id == Id, std::type_identity<P>, place_type_of<Id, Rest...>>::type;
};
template <place_kind_id Id>
struct place_type_of<Id> {
  using type = void;
};
template <class Op>
struct run_on_type {
  using type = cpu;
};
template <class Op>
requires requires { typename Op::run_on; }
struct run_on_type<Op> {
  using type = typename Op::run_on;
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

// How input slot Slot of a static call reaches kernel Kernel: rule 3 of kernel_choice.hpp
// evaluated at compile time, its key turned back into a kernel type. The input passes
// through untouched when it is exempt, or when nothing needs to change and no device id
// can differ.
template <class Op, class Kernel, std::size_t Slot, class In>
struct static_input_plan {
  static constexpr kernel_key from = static_input_key<In>();
  static constexpr kernel_key to = input_target_key(rules_of<Op>, Slot, from, Kernel::key());
  using target = kernel_type<
      typename Kernel::place_t, type_of<to.dtype()>,
      typename layout_type_of<to.layout().id(), typename In::layout_t, typename Kernel::layout_t>::type>;
  static constexpr bool pass_through =
      rules_of<Op>.exempt(Slot) || (!needs_transform(from, to) && !Kernel::place_t::has_device_id);
};

// One input of a static call (input slot Slot of operator Op, for kernel Kernel) as the
// kernel needs it. When it passes through, the kernel reads the caller's tensor itself: no
// copy, not even of the handle, so that such a call costs what calling the kernel directly
// costs. A transform that fails names the operator, the input and the kernel, as on the
// runtime path.
template <class Target, bool PassThrough, class In, class Op, class Kernel, std::size_t Slot>
class prepared_input {
 public:
  [[gnu::always_inline]] prepared_input(const In& in, int device) {
    if constexpr (PassThrough)
      held_ = &in.tensor();
    else
      held_ = detail::preparing_input(Op::name, Op::inputs[Slot], {}, Kernel::key(device),
                                      [&] { return fluidk::transform<Target>(in, device).tensor(); });
  }
  // Computed on each call rather than stored, so that the object may be copied or moved.
  const Tensor* get() const noexcept {
    if constexpr (PassThrough)
      return held_;
    else
      return &held_;
  }

 private:
  std::conditional_t<PassThrough, const Tensor*, Tensor> held_;
};

// An input left out: the kernel's argument is empty.
template <class Target, bool PassThrough, class Op, class Kernel, std::size_t Slot>
class prepared_input<Target, PassThrough, no_input_t, Op, Kernel, Slot> {
 public:
  [[gnu::always_inline]] prepared_input(const no_input_t&, int) noexcept {}
  const Tensor* get() const noexcept { return nullptr; }
};

template <class Op, class Kernel, std::size_t Slot, class In>
struct prepared_input_of {
  using plan = static_input_plan<Op, Kernel, Slot, In>;
  using type = prepared_input<typename plan::target, plan::pass_through, In, Op, Kernel, Slot>;
};
template <class Op, class Kernel, std::size_t Slot>
struct prepared_input_of<Op, Kernel, Slot, no_input_t> {
  using type = prepared_input<void, true, no_input_t, Op, Kernel, Slot>;
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
  detail::run_kernel(kernel, context);
}

template <class Op, class Key, class K, class Target, class... In, class... Out>
FLUIDK_DETAIL_INLINE void invoke_static(const K& kernel, const Target& t, const input_pack<In...>& in,
                                        const output_pack<Out...>& out, const attribute_map& attrs) {
  auto& device = kernel_context<Key>(t);
  const int device_id = device.place().device();
  [&]<std::size_t... I>(std::index_sequence<I...>) FLUIDK_DETAIL_LAMBDA_INLINE {
    [[maybe_unused]] detail::pack<typename prepared_input_of<Op, Key, I, In>::type...> prepared{
        {{detail::pack_get<I>(in.tensors), device_id}}...};
    std::array<kernel_arg, sizeof...(In)> input_args{kernel_arg(detail::pack_get<I>(prepared).get())...};
    invoke_prepared<Key>(kernel, device, device_id, input_args, out, attrs, Op::name, Op::inputs,
                         Op::outputs);
  }
  (std::index_sequence_for<In...>{});
}

[[noreturn, gnu::cold, gnu::noinline]] inline void attribute_disagrees(std::string_view op,
                                                                       std::string_view attribute,
                                                                       std::string_view given,
                                                                       std::string_view called) {
  throw error("operator '" + std::string(op) + "': attribute '" + std::string(attribute) + "' asks for " +
              std::string(given) + " but the static call runs it " + std::string(called));
}

// A static call's place and library are its target's, its data type Dt's (for an operator
// that takes it from an attribute): attributes that would make the runtime path choose
// otherwise (op_device, use_onednn and the other request attributes, the data-type
// attribute) are refused before anything runs, naming both. Rule 1a decides which place
// op_device would give, as on the runtime path.
[[gnu::cold, gnu::noinline]] inline void check_request_attributes(
    std::string_view op, const selection_rules& rules, const attribute_map& attrs, const place& target_place,
    library_type target_library, std::string_view dtype_attribute, std::optional<data_type> dtype) {
  selection_request given;
  given.executor_place = target_place;
  selection_request asked = given;
  asked.forced_place = op_device_of(attrs, op);
  if (const place p = expected_place(rules, asked), q = expected_place(rules, given); p != q)
    attribute_disagrees(op, "op_device", p.to_string(), "on " + q.to_string() + ", its target's place");
  if (const library_request l = library_asked(attrs, op); !l.attribute.empty() && l.library != target_library)
    attribute_disagrees(op, l.attribute, "library " + std::string(name_of(l.library)),
                        "with library " + std::string(name_of(target_library)) + ", its target's");
  if (dtype)
    if (const auto d = attribute_data_type(attrs, dtype_attribute, op); d && *d != *dtype)
      attribute_disagrees(op, dtype_attribute, name_of(*d), "in " + std::string(name_of(*dtype)));
}

}  // namespace detail

// What run<Op> would choose for these typed inputs (and data type Dt, for an operator that
// takes its data type from an attribute; void otherwise) on this target: a constexpr query
// that never fails to compile. `.status()` says whether a kernel serves the call.
template <class Op, class Target, class Dt, class... In>
inline constexpr selection static_selection = detail::static_select<Op, Target, Dt, In...>();

// The kernel type run<Op> would choose for these typed inputs on this target (void when
// there is none).
template <class Op, class Target, class... In>
using static_kernel_type =
    typename detail::chosen_type<Op, static_selection<Op, Target, void, In...>.index>::type;

// Runs operator Op on typed inputs. Dt gives the data type of an operator that takes it
// from an attribute (run<ops::fill_constant, float>(...)); others leave it out.
template <class Op, class Dt = void, class Target, class... In, class... Out>
FLUIDK_DETAIL_INLINE void run(const Target& t, const input_pack<In...>& in, const output_pack<Out...>& out,
                              const attribute_map& attrs = detail::empty_attributes) {
  static_assert(detail::operator_check<Op>::value);
  static_assert(sizeof...(In) == Op::inputs.size(),
                "fluidk: run<Op>: give one input per input slot of the operator");
  static_assert(sizeof...(Out) == Op::outputs.size(),
                "fluidk: run<Op>: give one output per output slot of the operator");
  static_assert(std::is_void_v<Dt> || rules_of<Op>.data_type_from_attribute,
                "fluidk: run<Op, DataType>: only an operator that takes its data type from an attribute "
                "(data_type_attribute) is given one; the inputs decide the others'");
  constexpr selection chosen = static_selection<Op, Target, Dt, In...>;
  constexpr selection_status status = chosen.status();
  static_assert(
      status != selection_status::inputs_disagree,
      "fluidk: the inputs of this operator disagree on the data type; name the input that decides "
      "with `static constexpr std::string_view data_type_input = ...;` (see the input types above)");
  static_assert(status != selection_status::no_data_type || !rules_of<Op>.data_type_from_attribute,
                "fluidk: this operator takes its data type from an attribute (data_type_attribute): give it "
                "as run<Op, DataType>(...)");
  static_assert(status != selection_status::no_data_type || rules_of<Op>.data_type_from_attribute,
                "fluidk: no input given decides this operator's data type (the deciding input is left out, "
                "or every input is exempt)");
  if constexpr (status == selection_status::no_kernel) {
    using where =
        typename detail::place_type_of<chosen.expected.key.place().kind_id(), typename Target::place_t,
                                       typename detail::run_on_type<Op>::type>::type;
    (void)sizeof(
        detail::no_kernel<
            Op,
            kernel_type<where, type_of<chosen.expected.key.dtype()>,
                        typename detail::layout_type_of<chosen.expected.key.layout().id(), layout::any,
                                                        typename detail::input_layout<In>::type...>::type,
                        typename Target::library_t>,
            kernel_keys_of<Op>>);
  } else if constexpr (status == selection_status::chosen) {
    using key = typename detail::chosen_type<Op, chosen.index>::type;
    // The default argument's map is known empty where the call is inlined: a call without
    // attributes reads nothing and saves no registers for the check (dispatch_bench, callgrind:
    // 125 instructions a call as a direct call's, 143 with the size test alone).
    if (&attrs != &detail::empty_attributes && attrs.size() != 0) {
      std::optional<data_type> dtype;
      if constexpr (!std::is_void_v<Dt>) dtype = data_type_of<Dt>;
      detail::check_request_attributes(Op::name, rules_of<Op>, attrs, t.context().place(),
                                       library_type_of<typename Target::library_t>,
                                       data_type_attribute_of<Op>(), dtype);
    }
    // A fallback is counted and reported, as on the runtime path (one compile-time test). The
    // static keys are on device 0 (the device is known only at run time); on_device puts a key
    // of the target's kind on its device, as kernel_context runs it.
    if constexpr (chosen.fell_back)
      detail::note_fallback(Op::name, on_device(chosen.expected.key, t.context().place()),
                            on_device(chosen.chosen, t.context().place()));
    // The chosen index is the kernel's place among the map's entries (registered_keys lists
    // them in that order): the entry is read there, without at_key's search of the hash table.
    const auto& kernel = detail::entry_at<chosen.index>(Op::kernels.storage).kernel;
    static_assert(Kernel<std::remove_cvref_t<decltype(kernel)>>,
                  "fluidk: a kernel must be callable as kernel(execution_context&) on a const object");
    detail::invoke_static<Op, key>(kernel, t, in, out, attrs);
  }
}

}  // namespace fluidk

#undef FLUIDK_DETAIL_INLINE
#undef FLUIDK_DETAIL_LAMBDA_INLINE
