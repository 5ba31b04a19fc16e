// A property of kernel choice: the static path, the runtime call and the executor pick the
// same kernel, or agree that there is none, for every operator declaration and request.
//
// Declarations are generated with Mp11 over a small key universe, 2 places (cpu, the
// simulated accelerator) x 2 data types (float, double) x 3 layouts (ANY, NCHW, nChw8c) x
// 2 libraries (plain, oneDNN) = 24 keys: each declaration registers a different subset of
// them, with one of three ways of deciding the data type and one of two fallback policies.
// A request is the input keys (X: every place, type and layout; Label: left out, float or
// int64 on the CPU), the executor's place, a forced library, and a fallback policy that
// replaces the operator's (none, off, CPU). The static picks are computed at compile time
// with the constexpr query that run<Op> itself uses (static_selection), into one array per
// declaration; the runtime picks are the kernels that actually ran.
#include <boost/mp11/algorithm.hpp>
#include <catch2/catch.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/static_dispatch.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "simulated_device.hpp"

using namespace fluidk;
using npu = fluidk_test::accelerator;
using boost::mp11::mp_at_c;
using boost::mp11::mp_list;

namespace {

constexpr std::size_t key_count = 24;
constexpr std::size_t declaration_count = 72;

// Key k of the universe: place k / 12, library (k / 6) % 2, data type (k / 3) % 2, layout k % 3.
using places = mp_list<cpu, npu>;
using libraries = mp_list<library::plain, library::onednn>;
using dtypes = mp_list<float, double>;
using universe_layouts = mp_list<layout::any, layout::nchw, layout::nChw8c>;

thread_local std::size_t ran = key_count;  // the universe index of the kernel that ran last

template <std::size_t K>
struct probe {
  using dtype = mp_at_c<dtypes, (K / 3) % 2>;
  using layouts = mp_list<mp_at_c<universe_layouts, K % 3>>;
  void operator()(execution_context&) const { ran = K; }
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
  static constexpr std::array<char, 8> storage{'p', 'r', 'o', 'p', '_', char('0' + D / 10), char('0' + D % 10)};
  static constexpr std::string_view name{storage.data(), 7};
  static constexpr std::array<std::string_view, 2> inputs{"X", "Label"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  // Label is moved, never re-laid-out: an int64 label needs no blocked layout.
  static constexpr std::array<std::string_view, 1> keep_layout_inputs{"Label"};
  static constexpr auto kernels = make_kernels(group<D, 0, 0>::entries, group<D, 0, 1>::entries,
                                               group<D, 1, 0>::entries, group<D, 1, 1>::entries);
};

// Requests: X 12 keys x Label 3 x executor place 2 x library 2 x policy 3.
constexpr std::size_t request_count = 12 * 3 * 2 * 2 * 3;
template <std::size_t R>
struct request {
  static constexpr std::size_t x = R % 12, label = (R / 12) % 3, where = (R / 36) % 2, lib = (R / 72) % 2,
                               policy = R / 144;
  using x_type = typed_tensor<mp_at_c<places, x / 6>, mp_at_c<dtypes, (x / 3) % 2>, mp_at_c<universe_layouts, x % 3>>;
  using label_type = mp_at_c<mp_list<no_input_t, typed_tensor<cpu, float>, typed_tensor<cpu, std::int64_t>>, label>;
  using fallback = mp_at_c<mp_list<operator_fallback, with_fallback<fallback_policy::none>,
                                   with_fallback<fallback_policy::cpu>>,
                           policy>;
  using target_type = target<mp_at_c<places, where>, mp_at_c<libraries, lib>, fallback>;
};

// An outcome: the universe index of the kernel, or key_count + the status when none runs.
constexpr std::size_t outcome_of(const selection& s, std::span<const kernel_key> keys) {
  if (s.status() != selection_status::chosen) return key_count + std::size_t(s.status());
  const kernel_key& k = keys[s.index];
  return (k.place().kind_id() == npu::id ? 12 : 0) + (k.library() == library_type::onednn ? 6 : 0) +
         (k.dtype() == data_type::float64 ? 3 : 0) +
         (k.layout() == data_layout::any ? 0 : k.layout() == data_layout::nchw ? 1 : 2);
}

template <class Op, std::size_t... R>
constexpr std::array<std::size_t, request_count> static_outcomes(std::index_sequence<R...>) {
  return {outcome_of(static_selection<Op, typename request<R>::target_type, void, typename request<R>::x_type,
                                      typename request<R>::label_type>,
                     registered_keys<Op>)...};
}

std::string describe(std::size_t outcome) {
  if (outcome < key_count) return "kernel " + std::to_string(outcome);
  switch (selection_status(outcome - key_count)) {
    case selection_status::no_kernel: return "no kernel";
    case selection_status::inputs_disagree: return "inputs disagree";
    case selection_status::no_data_type: return "no data type";
    default: return "?";
  }
}

// The outcome of a runtime call: the kernel that ran, or the status its error says.
template <class F>
std::size_t runtime_outcome(F&& call) {
  ran = key_count;
  try {
    call();
  } catch (const not_registered&) {
    return key_count + std::size_t(selection_status::no_kernel);
  } catch (const error& e) {
    if (std::string(e.what()).find("disagree on the data type") != std::string::npos)
      return key_count + std::size_t(selection_status::inputs_disagree);
    throw;
  }
  return ran;
}

struct runtime_request {
  place x_place, where;
  data_type x_dtype;
  data_layout x_layout;
  int label;  // 0 none, 1 float, 2 int64
  library_type lib;
  std::optional<fallback_policy> policy;
};
runtime_request runtime_request_of(std::size_t r) {
  const std::size_t x = r % 12;
  constexpr data_layout layouts[] = {data_layout::any, data_layout::nchw, data_layout::nChw8c};
  const place places_[] = {cpu_place, place::of<npu>(0)};
  const std::optional<fallback_policy> policies[] = {std::nullopt, fallback_policy::none, fallback_policy::cpu};
  return {places_[x / 6],
          places_[(r / 36) % 2],
          (x / 3) % 2 ? data_type::float64 : data_type::float32,
          layouts[x % 3],
          int((r / 12) % 3),
          (r / 72) % 2 ? library_type::onednn : library_type::plain,
          policies[r / 144]};
}

Tensor make(data_type dtype, data_layout layout, const place& where) {
  Tensor t({1, 8, 1, 1}, dtype, cpu_place, layout);
  std::memset(t.memory().handle, 0, t.storage_bytes());
  return where == cpu_place ? t : copy_to(t, where);
}

std::size_t checked = 0;

template <std::size_t D>
void check_declaration() {
  using op = declaration<D>;
  static constexpr auto statics = static_outcomes<op>(std::make_index_sequence<request_count>{});
  const operator_info& info = register_operator<op>();
  auto& registry = operator_registry::instance();
  Scope scope;
  Executor on_cpu(cpu_place), on_npu(place::of<npu>(0));
  for (std::size_t r = 0; r < request_count; ++r) {
    const runtime_request q = runtime_request_of(r);
    scope.var("x").set(LoDTensor(make(q.x_dtype, q.x_layout, q.x_place)));
    if (q.label != 0)
      scope.var("label").set(LoDTensor(make(q.label == 1 ? data_type::float32 : data_type::int64,
                                            data_layout::any, cpu_place)));
    registry.set_global_fallback(q.policy);
    attribute_map attrs;
    if (q.lib == library_type::onednn) attrs.set("use_onednn", true);

    std::vector<std::vector<Variable*>> in{{&scope.get("x")}, {}};
    if (q.label != 0) in[1].push_back(&scope.get("label"));
    const std::vector<std::vector<Variable*>> out{{&scope.var("out")}};
    const std::size_t by_call = runtime_outcome([&] { run_operator(info, q.where, in, out, attrs); });

    op_invocation call{std::string(op::name), {{"X", {"x"}}}, {{"Out", {"out"}}}, attrs};
    if (q.label != 0) call.inputs.push_back({"Label", {"label"}});
    Executor& executor = q.where == cpu_place ? on_cpu : on_npu;
    const std::size_t by_executor = runtime_outcome([&] { executor.run(std::span(&call, 1), scope); });
    registry.set_global_fallback(std::nullopt);

    if (by_call != statics[r] || by_executor != statics[r]) {
      INFO(op::name << " request " << r << ": static " << describe(statics[r]) << ", runtime "
                    << describe(by_call) << ", executor " << describe(by_executor));
      CHECK(false);
    }
    if (q.label != 0) scope.erase("label");
    ++checked;
  }
}

template <std::size_t... D>
void check_all(std::index_sequence<D...>) {
  (check_declaration<D>(), ...);
}

}  // namespace

TEST_CASE("the static path, the runtime call and the executor choose the same kernel",
          "[kernel_choice][property]") {
  operator_registry::instance().set_fallback_reporter([](const fallback_event&) {});
  check_all(std::make_index_sequence<declaration_count>{});
  operator_registry::instance().set_fallback_reporter(nullptr);
  CHECK(checked == declaration_count * request_count);
  WARN(declaration_count << " declarations x " << request_count << " requests = " << checked
                         << " choices compared");
}

// Every outcome occurs, so the property is not checked on one kind of case only.
constexpr bool covers_every_outcome() {
  bool kernel = false, none = false, disagree = false;
  for (const auto& outcomes : {static_outcomes<declaration<2>>(std::make_index_sequence<request_count>{}),
                               static_outcomes<declaration<4>>(std::make_index_sequence<request_count>{})})
    for (std::size_t o : outcomes) {
      kernel = kernel || o < key_count;
      none = none || o == key_count + std::size_t(selection_status::no_kernel);
      disagree = disagree || o == key_count + std::size_t(selection_status::inputs_disagree);
    }
  return kernel && none && disagree;
}
static_assert(covers_every_outcome());
