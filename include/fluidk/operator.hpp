// Declaring an operator: its name, input and output slots, its kernels as one Hana map from
// kernel_type to kernel built in one expression, and the rules for its expected kernel
// type. `kernels_on<Place, Library>(k...)` plays the part of Fluid's REGISTER_OP_KERNEL: one
// entry per kernel, the data type taken from the kernel, the layout from the library.
#pragma once

#include <array>
#include <boost/hana/at.hpp>
#include <boost/hana/basic_tuple.hpp>
#include <boost/hana/core/make.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/fwd/append.hpp>
#include <boost/hana/fwd/concat.hpp>
#include <boost/hana/fwd/drop_front.hpp>
#include <boost/hana/fwd/empty.hpp>
#include <boost/hana/fwd/find_if.hpp>
#include <boost/hana/fwd/is_empty.hpp>
#include <boost/hana/fwd/length.hpp>
#include <boost/hana/fwd/remove_if.hpp>
#include <boost/hana/fwd/transform.hpp>
#include <boost/hana/integral_constant.hpp>
#include <boost/hana/map.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/type.hpp>
#include <boost/hana/unpack.hpp>
#include <boost/hana/value.hpp>
#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/bind.hpp>
#include <boost/mp11/list.hpp>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fluidk/execution_context.hpp"
#include "fluidk/kernel_choice.hpp"
#include "fluidk/kernel_type.hpp"

namespace fluidk {

// A kernel: a callable on an execution context.
template <class K>
concept Kernel = std::is_invocable_v<const K&, execution_context&>;

namespace detail {
template <class K>
struct kernel_dtype_of {
  using type = void;
};
template <class K>
requires requires { typename K::dtype; }
struct kernel_dtype_of<K> {
  using type = typename K::dtype;
};

template <class K>
struct kernel_layouts_of {
  using type = boost::mp11::mp_list<layout::any>;
};
template <class K>
requires requires { typename K::layouts; }
struct kernel_layouts_of<K> {
  using type = typename K::layouts;
};
}  // namespace detail

// The data type a kernel computes in, as it states it: `using dtype = float;` in the kernel.
// (Not guessed from a template argument: relu_kernel<float> may well compute in double.)
template <class K>
using kernel_dtype = typename detail::kernel_dtype_of<K>::type;

// The layouts a kernel accepts: K::layouts (an Mp11 list) for a library that works in its
// own layouts (oneDNN's blocked ones), else the wildcard.
template <class K>
using kernel_layouts = typename detail::kernel_layouts_of<K>::type;

namespace detail {
// An element of an operator's kernel map: a Hana Product of the key (a kernel_type, as a
// hana type) and the kernel. hana::pair would do, but its instantiation costs several times
// more compile time, and compile time per operator is part of fluidk's interface.
struct kernel_map_entry_tag {};
template <class Key, class K>
struct kernel_map_entry {
  using hana_tag = kernel_map_entry_tag;
  K kernel;
};

template <class P, class Lib, class K>
constexpr bool check_kernel_declaration() {
  static_assert(Place<P>, "fluidk: kernels_on<Place, Library>(...): the first argument is not a place tag");
  static_assert(Library<Lib>,
                "fluidk: kernels_on<Place, Library>(...): the second argument is not a library tag");
  static_assert(DType<kernel_dtype<K>>,
                "fluidk: a kernel states the data type it computes in: declare `using dtype = ...;` in it");
  return Place<P> && Library<Lib> && DType<kernel_dtype<K>>;
}

// The entries of one kernel: one per layout it declares.
template <class P, class Lib, class K, class... L>
constexpr auto entries_of(const K& k, boost::mp11::mp_list<L...>) {
  return boost::hana::basic_tuple<kernel_map_entry<kernel_type<P, kernel_dtype<K>, L, Lib>, K>...>{
      kernel_map_entry<kernel_type<P, kernel_dtype<K>, L, Lib>, K>{k}...};
}

// Whether a kernel object holds nothing: an empty class, made and copied trivially. Every such
// object of a type behaves as every other, so an entry built from a default-constructed one is
// the entry built from the one given.
// (The compilers' built-in traits: the standard ones check completeness through a dozen
// instantiations for each kernel.)
template <class K>
inline constexpr bool stateless_kernel = __is_empty(K) && __is_trivially_constructible(K) &&
                                         __is_trivially_copyable(K);

// The entries of kernels that hold nothing, as types alone: what kernels_on returns for them,
// and the storage of the map make_kernels builds from them. A hana::basic_tuple of the
// entries, built from the kernels or not, was nearly all of an operator declaration's compile
// time (its compile-time memory, about 70 KB an entry with g++ 12, is also what the
// compiler's garbage collector walks for the rest of the file). The map is a Hana map as
// any other (map_tag, the same hash table of keys); its storage reads each entry from
// stateless_entry, one object per entry type, so that every address taken stays valid.
struct stateless_entries_tag {};
template <class... E>
struct stateless_entries {
  using hana_tag = stateless_entries_tag;
};
// (The kernel made by a direct call of its default constructor, which may be explicit.)
template <class E>
inline constexpr E stateless_entry{decltype(E::kernel)()};

// The same entries as a tuple that holds them, for the Hana algorithms that build a sequence
// from a map's storage (keys, values, insert, erase_key, find_if), and for a map that also has
// a kernel holding a value.
template <class... E>
constexpr boost::hana::basic_tuple<E...> entries_tuple(stateless_entries<E...>) {
  return boost::hana::basic_tuple<E...>{stateless_entry<E>...};
}

template <std::size_t I, class... E>
constexpr const auto& entry_at(const stateless_entries<E...>&) noexcept {
  return stateless_entry<boost::mp11::mp_at_c<boost::mp11::mp_list<E...>, I>>;
}
template <std::size_t I, class... E>
constexpr const auto& entry_at(const boost::hana::basic_tuple<E...>& entries) noexcept {
  return boost::hana::at_c<I>(entries);
}

// The entry of a kernel that declares one layout (the common case).
template <class P, class Lib, class K>
using one_layout_entry =
    kernel_map_entry<kernel_type<P, kernel_dtype<K>, boost::mp11::mp_front<kernel_layouts<K>>, Lib>, K>;

template <class P, class Lib, class K, class Layouts>
struct kernel_entry_types;
template <class P, class Lib, class K, class... L>
struct kernel_entry_types<P, Lib, K, boost::mp11::mp_list<L...>> {
  using type = stateless_entries<kernel_map_entry<kernel_type<P, kernel_dtype<K>, L, Lib>, K>...>;
};

// A group of no kernels (an empty tuple: a backend left out of the build, or a group that
// failed its checks) is a group of types as well.
template <class Group>
struct types_group {
  using type = Group;
};
template <>
struct types_group<boost::hana::basic_tuple<>> {
  using type = stateless_entries<>;
};

// A group as a tuple of entries, for a map that stateful kernels make from its groups' tuples.
template <class Entries>
constexpr const Entries& entries_tuple(const Entries& entries) {
  return entries;
}

template <class... A, class... B, std::size_t... I, std::size_t... J>
constexpr auto concat(const boost::hana::basic_tuple<A...>& a, const boost::hana::basic_tuple<B...>& b,
                      std::index_sequence<I...>, std::index_sequence<J...>) {
  return boost::hana::basic_tuple<A..., B...>{boost::hana::at_c<I>(a)..., boost::hana::at_c<J>(b)...};
}
template <class... A>
constexpr const boost::hana::basic_tuple<A...>& concat_all(const boost::hana::basic_tuple<A...>& a) {
  return a;
}
template <class... A, class... B, class... Rest>
constexpr auto concat_all(const boost::hana::basic_tuple<A...>& a, const boost::hana::basic_tuple<B...>& b,
                          const Rest&... rest) {
  return concat_all(concat(a, b, std::index_sequence_for<A...>{}, std::index_sequence_for<B...>{}), rest...);
}
}  // namespace detail

// The map entries of the kernels of one place and library, one per kernel (and per layout a
// kernel declares), the data type taken from each kernel: Fluid's REGISTER_OP_KERNEL. For
// kernels that hold nothing (the usual case), the entries are types alone, and so they stay in
// the map make_kernels builds; a group with a kernel that holds a value keeps the objects given.
template <class P, class Lib = library::plain, class... K>
constexpr auto kernels_on(const K&... k) {
  // Checked for the group at once; a kernel at a time (naming it) only when that fails.
  constexpr bool declared = Place<P> && Library<Lib> && (DType<kernel_dtype<K>> && ...);
  constexpr bool one_layout_each = ((boost::mp11::mp_size<kernel_layouts<K>>::value == 1) && ...);
  if constexpr (!declared) {
    (detail::check_kernel_declaration<P, Lib, K>() && ...);
    return boost::hana::make_basic_tuple();
  } else if constexpr ((detail::stateless_kernel<K> && ...)) {  // the common case: types alone
    if constexpr (one_layout_each)
      return detail::stateless_entries<detail::one_layout_entry<P, Lib, K>...>{};
    else
      return boost::mp11::mp_append<
          detail::stateless_entries<>,
          typename detail::kernel_entry_types<P, Lib, K, kernel_layouts<K>>::type...>{};
  } else {
    if constexpr (one_layout_each)
      return boost::hana::basic_tuple<detail::one_layout_entry<P, Lib, K>...>{
          detail::one_layout_entry<P, Lib, K>{k}...};
    else
      return detail::concat_all(detail::entries_of<P, Lib>(k, kernel_layouts<K>{})...);
  }
}

namespace detail {
// True when one kernel holds the kernel type: the static_assert that uses it names the
// kernel type and every kernel registered under it.
template <class Key, class... Kernels>
struct registered_once {
  static constexpr bool value = sizeof...(Kernels) == 1;
};

template <class Entries>
struct entry_types;
template <class... Key, class... K>
struct entry_types<boost::hana::basic_tuple<kernel_map_entry<Key, K>...>> {
  using keys = boost::mp11::mp_list<Key...>;
  using kernels = boost::mp11::mp_list<K...>;
  using entries = boost::mp11::mp_list<boost::mp11::mp_list<Key, K>...>;
};

template <class Key>
struct has_key {
  template <class Entry>
  using fn = std::is_same<boost::mp11::mp_front<Entry>, Key>;
};

// registered_once<K, the kernels registered under K...> for the first duplicated K.
template <class Types, bool Unique = boost::mp11::mp_is_set<typename Types::keys>::value>
struct first_duplicate {
  using type = registered_once<void, void>;
};
template <class Types>
struct first_duplicate<Types, false> {
  using keys = typename Types::keys;
  template <class Key>
  using duplicated = boost::mp11::mp_bool<(boost::mp11::mp_count<keys, Key>::value > 1)>;
  using key = boost::mp11::mp_front<boost::mp11::mp_copy_if<keys, duplicated>>;
  using type = boost::mp11::mp_apply<
      registered_once,
      boost::mp11::mp_push_front<
          boost::mp11::mp_transform<boost::mp11::mp_second,
                                    boost::mp11::mp_copy_if_q<typename Types::entries, has_key<key>>>,
          key>>;
};
}  // namespace detail

namespace detail {
// The type hana::map<E...> names, for entries whose keys Key... are distinct (checked
// before): Hana's map_impl over a hash table of one bucket per key, a type key hashing to the
// type itself. Hana finds each hash by reading the key back out of the tuple of entries, an
// at_c over all the entries and a hana::first for each; the keys are known here, so the type
// is written out. bench/compile's 200 operators of 16 kernels: 10.6 -> 9.0 s with g++ 12 -O2
// (the fastest of 5 rounds each). The storage is a basic_tuple of the entries, and the map
// then hana::map's type, or stateless_entries for kernels that hold nothing, and the map then
// a Hana map of the same hash table; test/dispatch_test.cpp checks both.
template <class Keys, class Indices, class Storage>
struct kernel_map_type;
template <class... Key, std::size_t... I, class Storage>
struct kernel_map_type<boost::mp11::mp_list<Key...>, std::index_sequence<I...>, Storage> {
  using type =
      boost::hana::detail::map_impl<boost::hana::detail::hash_table<boost::hana::detail::bucket<Key, I>...>,
                                    Storage>;
};

// Builds the map from all entries at once. Groups of kernels that hold nothing are merged as
// type lists, and their entries stay types. A map with a kernel that holds a value is built
// from tuples: every group's (a group of types becomes the tuple of its entries), unpacked one
// into the next, so that no tuple of all entries is made before the map's own.
struct make_checked_map {
  template <class... E>
  static constexpr bool check() {
    static_assert(
        first_duplicate<entry_types<boost::hana::basic_tuple<E...>>>::type::value,
        "fluidk: an operator registers the same kernel type twice (the kernel type and both kernels are "
        "named in registered_once<...>)");
    return boost::mp11::mp_is_set<typename entry_types<boost::hana::basic_tuple<E...>>::keys>::value;
  }
  // A map of entries that hold kernels is built as hana::map<E...> from its entries, which is
  // what hana::make_map builds after copying every entry through make_basic_tuple and its
  // checks (a third of the cost of a declaration).
  template <template <class...> class Storage, class... E>
  using map_type = typename kernel_map_type<typename entry_types<boost::hana::basic_tuple<E...>>::keys,
                                            std::index_sequence_for<E...>, Storage<E...>>::type;

  template <class... E>
  constexpr auto operator()(const E&... entries) const {
    if constexpr (!check<E...>())
      return boost::hana::make_map();
    else
      return map_type<boost::hana::basic_tuple, E...>(entries...);
  }
  template <class... E>
  constexpr auto operator()(stateless_entries<E...> entries) const {
    if constexpr (!check<E...>())
      return boost::hana::make_map();
    else
      return map_type<stateless_entries, E...>(static_cast<stateless_entries<E...>&&>(entries));
  }
};

template <class F>
constexpr auto merge_groups(const F& finish) {
  return finish();
}
template <class F, class Group, class... Rest>
constexpr auto merge_groups(const F& finish, const Group& group, const Rest&... rest) {
  return boost::hana::unpack(group, [&](const auto&... entries) {
    return merge_groups([&](const auto&... more) { return finish(entries..., more...); }, rest...);
  });
}
}  // namespace detail

// The kernel map of an operator, built in one expression from `kernels_on<...>(...)` groups.
// The same kernel type registered twice is a compile error naming it and both kernels.
template <class... Groups>
constexpr auto make_kernels(const Groups&... groups) {
  if constexpr ((boost::mp11::mp_similar<detail::stateless_entries<>,
                                         typename detail::types_group<Groups>::type>::value &&
                 ...))
    return detail::make_checked_map{}(
        boost::mp11::mp_append<detail::stateless_entries<>, typename detail::types_group<Groups>::type...>{});
  else
    return detail::merge_groups(detail::make_checked_map{}, detail::entries_tuple(groups)...);
}

// An operator type: a name, input and output slot names, and its kernel map.
template <class Op>
concept Operator = requires {
  { Op::name } -> std::convertible_to<std::string_view>;
  Op::inputs.size();
  Op::outputs.size();
  Op::kernels;
};

namespace detail {
template <class Op>
struct operator_check {
  static_assert(Operator<Op>,
                "fluidk: not an operator: declare `name`, `inputs` and `outputs` (arrays of slot names) and "
                "`kernels` (fluidk::make_kernels(...)) as static constexpr members");
  static constexpr bool value = Operator<Op>;
};

constexpr std::size_t slot_index(std::span<const std::string_view> names, std::string_view slot) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == slot) return i;
  return names.size();
}
}  // namespace detail

// Operator configuration, each part optional:
//   static constexpr std::string_view data_type_input = "X";  the input whose data type decides
//   static constexpr std::array<std::string_view, N> no_transform_inputs{...};  never transformed
//   static constexpr std::array<std::string_view, N> keep_layout_inputs{...};   moved and cast,
//       never re-laid-out (a convolution's filter next to a blocked-layout kernel)
//   static constexpr std::array<std::string_view, N> cast_inputs{...};  cast to the kernel's type
//   using run_on = cpu;        the place kind it always runs on (the executor's device, if of
//                              that kind, else device 0)
//   static constexpr std::string_view data_type_attribute = "dtype";  the attribute that gives
//       the data type (operators without deciding tensor inputs: fill_constant)
//   static constexpr fallback_policy fallback = ...;           default: none
template <class Op>
constexpr fallback_policy fallback_of() {
  if constexpr (requires { Op::fallback; })
    return Op::fallback;
  else
    return fallback_policy::none;
}

namespace detail {
constexpr bool is_listed(std::string_view slot, std::span<const std::string_view> names) {
  return slot_index(names, slot) < names.size();
}

// Whether no name of `names` repeats: a call and a program find a slot by its name.
constexpr bool names_differ(std::span<const std::string_view> names) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (slot_index(names.first(i), names[i]) < i) return false;
  return true;
}

// Whether every name of `listed` is one of `slots`.
constexpr bool names_slots(std::span<const std::string_view> listed,
                           std::span<const std::string_view> slots) {
  for (std::string_view name : listed)
    if (!is_listed(name, slots)) return false;
  return true;
}

// Whether the operator's lists of input slots (no_transform_inputs, keep_layout_inputs,
// cast_inputs) name only its input slots: a misspelt name would leave its slot silently
// unlisted.
template <class Op>
constexpr bool lists_name_inputs() {
  bool ok = true;
  if constexpr (requires { Op::no_transform_inputs; })
    ok = ok && names_slots(Op::no_transform_inputs, Op::inputs);
  if constexpr (requires { Op::keep_layout_inputs; })
    ok = ok && names_slots(Op::keep_layout_inputs, Op::inputs);
  if constexpr (requires { Op::cast_inputs; }) ok = ok && names_slots(Op::cast_inputs, Op::inputs);
  return ok;
}
}  // namespace detail

template <class Op>
constexpr bool no_transform_input(std::string_view slot) {
  if constexpr (requires { Op::no_transform_inputs; })
    return detail::is_listed(slot, Op::no_transform_inputs);
  else
    return false;
}

template <class Op>
constexpr bool keep_layout_input(std::string_view slot) {
  if constexpr (requires { Op::keep_layout_inputs; })
    return detail::is_listed(slot, Op::keep_layout_inputs);
  else
    return false;
}

template <class Op>
constexpr bool cast_input(std::string_view slot) {
  if constexpr (requires { Op::cast_inputs; })
    return detail::is_listed(slot, Op::cast_inputs);
  else
    return false;
}

template <class Op>
constexpr std::size_t data_type_input_index() {
  if constexpr (requires { Op::data_type_input; }) {
    constexpr std::size_t i = detail::slot_index(Op::inputs, Op::data_type_input);
    static_assert(i < Op::inputs.size(), "fluidk: data_type_input names no input slot of the operator");
    return i;
  } else {
    return selection_rules::none;  // none: every input not exempt decides, and all must agree
  }
}

// The attribute an operator without deciding tensor inputs takes its data type from
// (Fluid's fill_constant and uniform_random: "dtype"); empty when it declares none.
template <class Op>
constexpr std::string_view data_type_attribute_of() {
  if constexpr (requires { Op::data_type_attribute; })
    return Op::data_type_attribute;
  else
    return {};
}

namespace detail {
// The kernel types of an operator's map as an Mp11 list, in declaration order. (A function
// object rather than a lambda: g++ 12 mishandles lambdas in alias templates.)
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
// Read off the entries the map make_kernels builds keeps (its storage_type), without
// instantiating unpack.
template <class Storage>
struct storage_keys {};
template <class... Key, class... K>
struct storage_keys<boost::hana::basic_tuple<kernel_map_entry<Key, K>...>> {
  using type = boost::mp11::mp_list<Key...>;
};
template <class... Key, class... K>
struct storage_keys<stateless_entries<kernel_map_entry<Key, K>...>> {
  using type = boost::mp11::mp_list<Key...>;
};
template <class Map>
requires requires { typename storage_keys<typename Map::storage_type>::type; }
struct map_keys<Map> {
  using type = typename storage_keys<typename Map::storage_type>::type;
};

template <class Keys>
struct key_array;
template <class... Key>
struct key_array<boost::mp11::mp_list<Key...>> {
  static constexpr std::array<kernel_key, sizeof...(Key)> value{Key::key()...};
};

// Bit s set when Flag holds for input slot s.
template <class Op, bool (*Flag)(std::string_view)>
constexpr std::uint64_t input_mask() {
  std::uint64_t mask = 0;
  for (std::size_t i = 0; i < Op::inputs.size(); ++i)
    if (Flag(Op::inputs[i])) mask |= std::uint64_t(1) << i;
  return mask;
}

template <class Op>
constexpr std::optional<place> run_on_place() {
  if constexpr (requires { typename Op::run_on; })
    return place::of<typename Op::run_on>(0);
  else
    return std::nullopt;
}
}  // namespace detail

// The kernel types of an operator's map as an Mp11 list, in declaration order.
template <class Op>
using kernel_keys_of = typename detail::map_keys<std::remove_cvref_t<decltype(Op::kernels)>>::type;

// The same keys as values, in the same order: what the rules of kernel choice read.
template <class Op>
inline constexpr const auto& registered_keys = detail::key_array<kernel_keys_of<Op>>::value;

// An operator's configuration as the rules of kernel_choice.hpp read it, on both paths.
template <class Op>
inline constexpr selection_rules rules_of = [] {
  static_assert(Op::inputs.size() <= 64, "fluidk: an operator has at most 64 input slots");
  static_assert(detail::names_differ(Op::inputs) && detail::names_differ(Op::outputs),
                "fluidk: an operator's input slots have names that differ, and so do its output slots (a "
                "call and a program find a slot by its name)");
  static_assert(detail::lists_name_inputs<Op>(),
                "fluidk: no_transform_inputs, keep_layout_inputs and cast_inputs name only input slots of "
                "the operator");
  selection_rules r;
  r.keys = registered_keys<Op>;
  r.no_transform = detail::input_mask<Op, no_transform_input<Op>>();
  r.cast = detail::input_mask<Op, cast_input<Op>>();
  r.keep_layout = detail::input_mask<Op, keep_layout_input<Op>>();
  r.data_type_input = data_type_input_index<Op>();
  r.data_type_from_attribute = !data_type_attribute_of<Op>().empty();
  r.run_on = detail::run_on_place<Op>();
  r.fallback = fallback_of<Op>();
  return r;
}();

}  // namespace fluidk

// kernel_map_entry as a Hana Product: first is the key (a hana type), second the kernel.
template <>
struct boost::hana::first_impl<fluidk::detail::kernel_map_entry_tag> {
  template <class Key, class K>
  static constexpr boost::hana::basic_type<Key> apply(
      const fluidk::detail::kernel_map_entry<Key, K>&) noexcept {
    return {};
  }
};
template <>
struct boost::hana::second_impl<fluidk::detail::kernel_map_entry_tag> {
  template <class Key, class K>
  static constexpr const K& apply(const fluidk::detail::kernel_map_entry<Key, K>& e) noexcept {
    return e.kernel;
  }
  template <class Key, class K>
  static constexpr K& apply(fluidk::detail::kernel_map_entry<Key, K>& e) noexcept {
    return e.kernel;
  }
};
template <>
struct boost::hana::make_impl<fluidk::detail::kernel_map_entry_tag> {
  template <class Key, class K>
  static constexpr auto apply(Key&&, K&& kernel) {
    return fluidk::detail::kernel_map_entry<typename std::decay_t<Key>::type, std::decay_t<K>>{
        static_cast<K&&>(kernel)};
  }
};

// The storage of a map of kernels that hold nothing (stateless_entries) as Hana sees it: an
// Iterable and Foldable whose elements are the stateless_entry objects; the algorithms that
// build a new sequence from it work on the tuple of the same entries.
template <>
struct boost::hana::at_impl<fluidk::detail::stateless_entries_tag> {
  template <class... E, class N>
  static constexpr const auto& apply(const fluidk::detail::stateless_entries<E...>& entries,
                                     const N&) noexcept {
    return fluidk::detail::entry_at<N::value>(entries);
  }
};
template <>
struct boost::hana::drop_front_impl<fluidk::detail::stateless_entries_tag> {
  template <class... E, class N>
  static constexpr auto apply(const fluidk::detail::stateless_entries<E...>&, const N&) noexcept {
    // Past the end, the empty sequence (as Hana's own sequences do).
    constexpr std::size_t n = N::value < sizeof...(E) ? N::value : sizeof...(E);
    return boost::mp11::mp_drop_c<fluidk::detail::stateless_entries<E...>, n>{};
  }
};
template <>
struct boost::hana::is_empty_impl<fluidk::detail::stateless_entries_tag> {
  template <class... E>
  static constexpr auto apply(const fluidk::detail::stateless_entries<E...>&) noexcept {
    return boost::hana::bool_c<sizeof...(E) == 0>;
  }
};
template <>
struct boost::hana::length_impl<fluidk::detail::stateless_entries_tag> {
  template <class... E>
  static constexpr auto apply(const fluidk::detail::stateless_entries<E...>&) noexcept {
    return boost::hana::size_c<sizeof...(E)>;
  }
};
template <>
struct boost::hana::unpack_impl<fluidk::detail::stateless_entries_tag> {
  template <class... E, class F>
  static constexpr decltype(auto) apply(const fluidk::detail::stateless_entries<E...>&, F&& f) {
    return static_cast<F&&>(f)(fluidk::detail::stateless_entry<E>...);
  }
};
// The function sees each stateless_entry, as at and unpack give it (not a temporary copy).
template <>
struct boost::hana::transform_impl<fluidk::detail::stateless_entries_tag> {
  template <class... E, class F>
  static constexpr auto apply(const fluidk::detail::stateless_entries<E...>&, const F& f) {
    return boost::hana::make_basic_tuple(f(fluidk::detail::stateless_entry<E>)...);
  }
};
// empty and concat: what Hana's concept checks ask of a sequence (MonadPlus) before append and
// remove_if. The storage is no Sequence: it has the algorithms here, and Hana's map uses no
// others on it (filter, prepend, reverse or zip do not apply to it).
template <>
struct boost::hana::empty_impl<fluidk::detail::stateless_entries_tag> {
  static constexpr fluidk::detail::stateless_entries<> apply() noexcept { return {}; }
};
template <>
struct boost::hana::concat_impl<fluidk::detail::stateless_entries_tag> {
  template <class... E, class... F>
  static constexpr fluidk::detail::stateless_entries<E..., F...> apply(
      const fluidk::detail::stateless_entries<E...>&,
      const fluidk::detail::stateless_entries<F...>&) noexcept {
    return {};
  }
};
template <>
struct boost::hana::append_impl<fluidk::detail::stateless_entries_tag> {
  template <class Entries, class X>
  static constexpr auto apply(const Entries& entries, X&& x) {
    return boost::hana::append(fluidk::detail::entries_tuple(entries), static_cast<X&&>(x));
  }
};
// The predicate sees each stateless_entry (as transform's function does) and answers at
// compile time, as Hana asks of a predicate over a sequence.
template <>
struct boost::hana::remove_if_impl<fluidk::detail::stateless_entries_tag> {
  template <class Pred>
  struct removed {
    template <class E>
    using fn = boost::mp11::mp_bool<
        boost::hana::value<decltype(std::declval<const Pred&>()(fluidk::detail::stateless_entry<E>))>()>;
  };
  template <class... E, class Pred>
  static constexpr auto apply(const fluidk::detail::stateless_entries<E...>&, const Pred&) {
    return fluidk::detail::entries_tuple(
        boost::mp11::mp_remove_if_q<fluidk::detail::stateless_entries<E...>, removed<Pred>>{});
  }
};
template <>
struct boost::hana::find_if_impl<fluidk::detail::stateless_entries_tag> {
  template <class Entries, class Pred>
  static constexpr auto apply(const Entries& entries, Pred&& pred) {
    return boost::hana::find_if(fluidk::detail::entries_tuple(entries), static_cast<Pred&&>(pred));
  }
};
