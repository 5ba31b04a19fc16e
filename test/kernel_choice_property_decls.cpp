// The declarations of the kernel-choice property test (kernel_choice_property_test.cpp runs
// them) and their static picks: the static path, the runtime call and the executor must
// pick the same kernel, or agree that there is none, for every declaration and request.
//
// Declarations are generated with Mp11 over a small key universe, 2 places (cpu, the
// simulated accelerator) x 2 data types (float, double) x 3 layouts (ANY, NCHW, nChw8c) x
// 2 libraries (plain, oneDNN) = 24 keys: each declaration registers a different subset of
// them, with one of three ways of deciding the data type and one of two fallback policies.
// A request is the input keys (X: every place, type and layout; Label: left out, float or
// int64 on the CPU), the executor's place, a forced library, and a fallback policy that
// replaces the operator's (none, off, CPU). The static picks are those of the composition
// that run<Op> uses (static_selection: select_kernel over rules_of<Op>, the inputs' and the
// target's types turned into values at compile time), checked against static_selection itself
// request by request for three declarations; the runtime picks are the kernels that actually
// ran.
#include <array>
#include <boost/mp11/algorithm.hpp>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/static_dispatch.hpp>
#include <vector>

#include "kernel_choice_property.hpp"
#include "simulated_device.hpp"

using namespace fluidk;
using npu = fluidk_test::accelerator;
using boost::mp11::mp_at_c;
using boost::mp11::mp_list;

namespace {

using fluidk_test::property::declaration_count;
using fluidk_test::property::key_count;
using fluidk_test::property::request_count;

// Key k of the universe: place k / 12, library (k / 6) % 2, data type (k / 3) % 2, layout k % 3.
using places = mp_list<cpu, npu>;
using libraries = mp_list<library::plain, library::onednn>;
using dtypes = mp_list<float, double>;
using universe_layouts = mp_list<layout::any, layout::nchw, layout::nChw8c>;

template <std::size_t K>
struct probe {
  using dtype = mp_at_c<dtypes, (K / 3) % 2>;
  using layouts = mp_list<mp_at_c<universe_layouts, K % 3>>;
  void operator()(execution_context&) const { fluidk_test::property::ran = K; }
};

// The subset of declaration D: a different pseudo-random, non-empty mask per declaration.
constexpr std::uint32_t mask_of(std::size_t d) {
  std::uint64_t x = 0x9e3779b97f4a7c15ull * (d + 1);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 32;
  const auto mask = std::uint32_t(x & ((1u << key_count) - 1));
  return mask == 0 ? 1u : mask;
}

template <std::size_t D, std::size_t P, std::size_t Lib>
struct group {
  template <class K>
  using in = std::bool_constant<((mask_of(D) >> K::value) & 1) != 0 && K::value / 12 == P &&
                                (K::value / 6) % 2 == Lib>;
  template <class... K>
  static constexpr auto make(mp_list<K...>) {
    return kernels_on<mp_at_c<places, P>, mp_at_c<libraries, Lib>>(probe<K::value>{}...);
  }
  static constexpr auto entries = make(boost::mp11::mp_copy_if<boost::mp11::mp_iota_c<key_count>, in>{});
};

// How the data type is decided: Label exempt; X named; both inputs deciding.
template <std::size_t Way>
struct deciding {};
template <>
struct deciding<0> {
  static constexpr std::array<std::string_view, 1> no_transform_inputs{"Label"};
};
template <>
struct deciding<1> {
  static constexpr std::string_view data_type_input = "X";
};
template <bool CanFallBack>
struct policy {};
template <>
struct policy<true> {
  static constexpr fallback_policy fallback = fallback_policy::cpu;
};

template <std::size_t D>
struct declaration : deciding<D % 3>, policy<(D / 3) % 2 == 1> {
  static constexpr std::array<char, 8> storage{
      'p', 'r', 'o', 'p', '_', char('0' + D / 10), char('0' + D % 10)};
  static constexpr std::string_view name{storage.data(), 7};
  static constexpr std::array<std::string_view, 2> inputs{"X", "Label"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Label is moved, never re-laid-out: an int64 label needs no blocked layout.
  static constexpr std::array<std::string_view, 1> keep_layout_inputs{"Label"};
  static constexpr auto kernels = make_kernels(group<D, 0, 0>::entries, group<D, 0, 1>::entries,
                                               group<D, 1, 0>::entries, group<D, 1, 1>::entries);
};

// Requests: X 12 keys x Label 3 x executor place 2 x library 2 x policy 3 (the same
// decoding as fluidk_test::property::request_of).
template <std::size_t R>
struct request {
  static constexpr std::size_t x = R % 12, label = (R / 12) % 3, where = (R / 36) % 2, lib = (R / 72) % 2,
                               policy = R / 144;
  using x_type =
      typed_tensor<mp_at_c<places, x / 6>, mp_at_c<dtypes, (x / 3) % 2>, mp_at_c<universe_layouts, x % 3>>;
  using label_type =
      mp_at_c<mp_list<no_input_t, typed_tensor<cpu, float>, typed_tensor<cpu, std::int64_t>>, label>;
  using fallback = mp_at_c<
      mp_list<operator_fallback, with_fallback<fallback_policy::strict>, with_fallback<fallback_policy::cpu>>,
      policy>;
  using target_type = target<mp_at_c<places, where>, mp_at_c<libraries, lib>, fallback>;
};

// An outcome: the universe index of the kernel, or key_count + the status when none runs.
constexpr std::size_t outcome_of(const selection& s, std::span<const kernel_key> keys) {
  if (s.status() != selection_status::chosen) return key_count + std::size_t(s.status());
  const kernel_key& k = keys[s.index];
  return (k.place().kind_id() == npu::id ? 12 : 0) +
         (k.library() == library_type_of<library::onednn> ? 6 : 0) +
         (k.dtype() == data_type::float64 ? 3 : 0) +
         (k.layout() == data_layout::any    ? 0
          : k.layout() == data_layout::nchw ? 1
                                            : 2);
}

// The static path's view of request R, from its types: the same input_state array and
// selection_request that run<Op> builds (they do not depend on the operator).
struct static_call {
  std::span<const input_state> inputs;
  selection_request request;
};
template <std::size_t R>
constexpr static_call static_call_of() {
  using q = request<R>;
  return {detail::static_inputs<typename q::x_type, typename q::label_type>::value,
          detail::static_request<typename q::target_type, void>()};
}
template <std::size_t... R>
constexpr std::array<static_call, request_count> make_static_calls(std::index_sequence<R...>) {
  return {static_call_of<R>()...};
}
constexpr auto static_calls = make_static_calls(std::make_index_sequence<request_count>{});

// The static pick of declaration Op for request r: static_selection's composition
// (select_kernel over rules_of<Op>) over the inputs and the request that run<Op> builds from
// the request's types (static_calls, computed at compile time).
template <class Op>
constexpr std::size_t static_outcome(std::size_t r) {
  return outcome_of(select_kernel(rules_of<Op>, static_calls[r].inputs, static_calls[r].request),
                    registered_keys<Op>);
}
template <class Op>
constexpr std::array<std::size_t, request_count> static_outcomes() {
  std::array<std::size_t, request_count> out{};
  for (std::size_t r = 0; r < request_count; ++r) out[r] = static_outcome<Op>(r);
  return out;
}

// The same through static_selection itself, instantiated per request (for a few
// declarations: it is what static_outcomes composes, spelled by run<Op>).
template <class Op, std::size_t... R>
constexpr bool static_selection_agrees(std::index_sequence<R...>) {
  constexpr auto outcomes = static_outcomes<Op>();
  constexpr std::array<std::size_t, request_count> by_query{
      outcome_of(static_selection<Op, typename request<R>::target_type, void, typename request<R>::x_type,
                                  typename request<R>::label_type>,
                 registered_keys<Op>)...};
  return by_query == outcomes;
}

// The static picks of declaration D. Those of three declarations are evaluated at compile time,
// as run<Op> evaluates them, and checked against static_selection itself; those of the others
// by the same constexpr functions when the test runs. With all 72 at compile time, this file
// took 45 s to compile with g++ 12 (-Og) and 55 s with clang++-14 under ASan and UBSan; 17 s
// and 38 s this way.
template <std::size_t D>
std::vector<std::size_t> static_outcomes_of() {
  if constexpr (D == 0 || D == 4 || D == 5) {
    static_assert(static_selection_agrees<declaration<D>>(std::make_index_sequence<request_count>{}));
    constexpr auto outcomes = static_outcomes<declaration<D>>();
    return {outcomes.begin(), outcomes.end()};
  } else {
    // static_outcomes' loop again, over an index known only at run time: g++ folds a call of
    // static_outcomes<...>() at compile time even where no constant is required.
    std::vector<std::size_t> out(request_count);
    for (std::size_t r = 0; r < request_count; ++r) out[r] = static_outcome<declaration<D>>(r);
    return out;
  }
}

template <std::size_t... D>
std::vector<fluidk_test::property::declared> declare_all(std::index_sequence<D...>) {
  return {{&register_operator<declaration<D>>(), static_outcomes_of<D>()}...};
}

// Every outcome occurs, so the property is not checked on one kind of case only.
constexpr bool covers_every_outcome() {
  bool kernel = false, none = false, disagree = false;
  for (const auto& outcomes : {static_outcomes<declaration<2>>(), static_outcomes<declaration<4>>()})
    for (std::size_t o : outcomes) {
      kernel = kernel || o < key_count;
      none = none || o == key_count + std::size_t(selection_status::no_kernel);
      disagree = disagree || o == key_count + std::size_t(selection_status::inputs_disagree);
    }
  return kernel && none && disagree;
}
static_assert(covers_every_outcome());

}  // namespace

std::vector<fluidk_test::property::declared> fluidk_test::property::declarations() {
  return declare_all(std::make_index_sequence<declaration_count>{});
}
