// Kernel registration and dispatch: one Hana map per operator, the static path resolved at
// compile time, the runtime table generated from the same map, the expected-kernel-type
// rules, fallback policy, listing and explain.
#include <atomic>
#include <boost/hana/erase_key.hpp>
#include <catch2/catch.hpp>
#include <deque>
#include <fluidk/devices/cudnn_tags.hpp>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/scope.hpp>
#include <fluidk/static_dispatch.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <string>
#include <thread>
#include <vector>

#include "simulated_device.hpp"
#if defined(FLUIDK_HAS_CUDA) && FLUIDK_HAS_CUDA
#include <fluidk/devices/cuda.hpp>
#endif

using namespace fluidk;

// A second place without running device code: the simulated accelerator.
using npu = fluidk_test::accelerator;

namespace {
// Which kernel ran last, and with which key.
thread_local std::string last_kernel;
thread_local kernel_key last_key;

template <class T>
struct conv_plain {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    last_kernel = "cpu plain";
    last_key = ctx.kernel();
  }
};
template <class T>
struct conv_onednn {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nChw8c, layout::nChw16c>;
  void operator()(execution_context& ctx) const {
    last_kernel = "cpu onednn";
    last_key = ctx.kernel();
  }
};
template <class T>
struct conv_npu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    last_kernel = "npu plain";
    last_key = ctx.kernel();
  }
};
template <class T>
struct conv_npu_dnn {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nchw>;
  void operator()(execution_context& ctx) const {
    last_kernel = "npu cudnn";
    last_key = ctx.kernel();
  }
};

// Fluid's multi-kernel case: CPU plain, CPU oneDNN, accelerator plain and accelerator with
// its vendor library.
struct conv2d {
  static constexpr std::string_view name = "conv2d_test";
  static constexpr std::array<std::string_view, 2> inputs{"Input", "Filter"};
  static constexpr std::array<std::string_view, 1> outputs{"Output"};
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(conv_plain<float>{}, conv_plain<double>{}),
                   fluidk::kernels_on<cpu, library::onednn>(conv_onednn<float>{}),
                   fluidk::kernels_on<npu>(conv_npu<float>{}),
                   fluidk::kernels_on<npu, library::cudnn>(conv_npu_dnn<float>{}));
};

// make_kernels writes out the type hana::map gives its entries (operator.hpp,
// kernel_map_type), here with a kernel of two layouts among them: the same hash table of
// keys; kernels that hold nothing are kept as types (stateless_entries), others in
// hana::map's own tuple, and then the map is hana::map's type.
template <class Storage>
struct hana_map_of;
template <class... E>
struct hana_map_of<boost::hana::basic_tuple<E...>> {
  using type = boost::hana::map<E...>;
};
template <class... E>
struct hana_map_of<detail::stateless_entries<E...>> {
  using type = boost::hana::map<E...>;
};
using conv2d_map = std::remove_cvref_t<decltype(conv2d::kernels)>;
static_assert(std::is_same_v<conv2d_map::hash_table_type,
                             hana_map_of<conv2d_map::storage_type>::type::hash_table_type>);
static_assert(boost::hana::is_a<boost::hana::map_tag, conv2d_map>);

// Elementwise: doubles its input; CPU float and double only.
template <class T>
struct scale_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input(0);
    Tensor& out = ctx.output(0);
    out = Tensor(x.dims(), x.dtype(), ctx.place(), x.layout());
    for (std::int64_t i = 0; i < x.numel(); ++i) out.data<T>()[i] = x.data<T>()[i] * T(2);
    last_kernel = "scale cpu";
    last_key = ctx.kernel();
  }
};
struct scale_none {
  static constexpr std::string_view name = "scale_no_fallback";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(scale_cpu<float>{}, scale_cpu<double>{}));
};
struct scale_fallback : scale_none {
  static constexpr std::string_view name = "scale_with_fallback";
  static constexpr fallback_policy fallback = fallback_policy::cpu;
};

// cross_entropy: float logits decide the data type; int64 labels are exempt from transforms.
template <class T>
struct cross_entropy_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    last_kernel = "cross_entropy " + std::string(name_of(data_type_of<T>));
    last_key = ctx.kernel();
  }
};
struct cross_entropy {
  static constexpr std::string_view name = "cross_entropy_test";
  static constexpr std::array<std::string_view, 2> inputs{"Logits", "Label"};
  static constexpr std::array<std::string_view, 1> outputs{"Loss"};
  static constexpr std::string_view data_type_input = "Logits";
  static constexpr std::array<std::string_view, 1> no_transform_inputs{"Label"};
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(cross_entropy_cpu<float>{}, cross_entropy_cpu<double>{}),
                   fluidk::kernels_on<npu>(cross_entropy_cpu<float>{}));
};

// An operator whose kernel wants its second input cast to the kernel's data type.
template <class T>
struct add_cpu {
  using dtype = T;
  void operator()(execution_context& ctx) const {
    last_kernel =
        std::string(name_of(ctx.input(0).dtype())) + "+" + std::string(name_of(ctx.input(1).dtype()));
    last_key = ctx.kernel();
  }
};
struct add_cast {
  static constexpr std::string_view name = "add_cast_test";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Y"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_input = "X";
  static constexpr std::array<std::string_view, 1> cast_inputs{"Y"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(add_cpu<float>{}));
};

// crf_decoding runs on the CPU whatever the program's place.
struct crf_decoding {
  static constexpr std::string_view name = "crf_decoding_test";
  static constexpr std::array<std::string_view, 1> inputs{"Emission"};
  static constexpr std::array<std::string_view, 1> outputs{"Path"};
  using run_on = cpu;
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(scale_cpu<float>{}));
};

// Runs on the accelerator whatever the program's place: on the program's device when that is
// an accelerator, else on device 0.
struct on_npu {
  static constexpr std::string_view name = "on_npu_test";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  using run_on = npu;
  static constexpr auto kernels = make_kernels(kernels_on<npu>(conv_npu<float>{}));
};

// An NCHW kernel on the accelerator that records the layout and place of what it reads.
struct nchw_seen {
  using dtype = float;
  using layouts = boost::mp11::mp_list<layout::nchw>;
  void operator()(execution_context& ctx) const {
    last_kernel = std::string(name_of(ctx.input(0).layout())) + " on " + ctx.input(0).place().to_string();
    last_key = ctx.kernel();
  }
};
struct nchw_on_npu {
  static constexpr std::string_view name = "nchw_on_npu_test";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<npu>(nchw_seen{}));
};

const operator_info& conv_info = register_operator<conv2d>();
const operator_info& nchw_on_npu_info = register_operator<nchw_on_npu>();
const operator_info& scale_none_info = register_operator<scale_none>();
const operator_info& scale_fallback_info = register_operator<scale_fallback>();
const operator_info& cross_entropy_info = register_operator<cross_entropy>();
const operator_info& add_cast_info = register_operator<add_cast>();
const operator_info& crf_info = register_operator<crf_decoding>();
const operator_info& on_npu_info = register_operator<on_npu>();

// Runs the chosen kernel entry on a context of the CPU (selection is what is tested).
kernel_choice select_and_call(const operator_info& op, const kernel_key& expected) {
  const kernel_choice choice = choose_kernel(op, expected);
  execution_context context(op.name(), op.inputs(), op.outputs(), context_of(cpu_place), choice.chosen, {},
                            {});
  last_kernel.clear();
  (*choice.entry)(context);
  return choice;
}

Tensor filled(const dims& shape, data_type dtype, const place& where = cpu_place,
              data_layout layout = data_layout::any) {
  Tensor t(shape, dtype, cpu_place, layout);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == data_type::float32) t.data<float>()[i] = float(i);
    if (dtype == data_type::float64) t.data<double>()[i] = double(i);
    if (dtype == data_type::int64) t.data<std::int64_t>()[i] = i;
  }
  return where == cpu_place ? t : copy_to(t, where);
}

// A variable holding a dense tensor (sharing its buffer), for the runtime calls, which take
// variables by slot; kept until the program ends.
Variable* held(const Tensor& t) {
  static std::deque<Variable> variables;
  variables.emplace_back("held").set(LoDTensor(t));
  return &variables.back();
}
}  // namespace

static_assert(decltype(boost::hana::length(conv2d::kernels))::value == 6);  // oneDNN: one entry per layout

namespace {
// A kernel that holds a value: its entry keeps the object given, while the entries of kernels
// that hold nothing are made from types alone (operator.hpp, stateless_entries). Both kinds,
// in one group and in groups side by side, with a kernel of two layouts among each.
template <class T>
struct add_held {
  using dtype = T;
  T value;
  void operator()(execution_context& ctx) const {
    Tensor out(ctx.input(0).dims(), data_type_of<T>);
    for (std::int64_t i = 0; i < out.numel(); ++i) out.data<T>()[i] = ctx.input(0).data<T>()[i] + value;
    ctx.output(0) = std::move(out);
  }
};
template <class T>
struct add_held_blocked : add_held<T> {
  using layouts = boost::mp11::mp_list<layout::nChw8c, layout::nChw16c>;
};
struct add_mixed {
  static constexpr std::string_view name = "add_mixed";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(conv_plain<std::int64_t>{}, add_held<float>{2.5f}, add_held<double>{-1.0}),
                   kernels_on<cpu, library::onednn>(conv_onednn<float>{}), kernels_on<npu>(conv_npu<float>{}),
                   kernels_on<npu, library::onednn>(add_held_blocked<float>{{7.0f}}));
};
// The same kernel types, every kernel holding nothing (only the map is read).
struct add_stateless {
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(conv_plain<std::int64_t>{}, conv_plain<float>{}, conv_plain<double>{}),
                   kernels_on<cpu, library::onednn>(conv_onednn<float>{}), kernels_on<npu>(conv_npu<float>{}),
                   kernels_on<npu, library::onednn>(conv_onednn<float>{}));
};
using add_mixed_map = std::remove_cvref_t<decltype(add_mixed::kernels)>;
using add_stateless_map = std::remove_cvref_t<decltype(add_stateless::kernels)>;
static_assert(std::is_same_v<add_mixed_map, hana_map_of<add_mixed_map::storage_type>::type>);
static_assert(boost::mp11::mp_similar<add_stateless_map::storage_type, detail::stateless_entries<>>::value);
static_assert(std::is_same_v<add_stateless_map::hash_table_type, add_mixed_map::hash_table_type>);
static_assert(std::is_same_v<kernel_keys_of<add_mixed>, kernel_keys_of<add_stateless>>);
static_assert(decltype(boost::hana::length(add_mixed::kernels))::value == 8);
static_assert(boost::hana::at_key(add_mixed::kernels, boost::hana::type_c<kernel_type<cpu, float>>).value ==
              2.5f);
static_assert(boost::hana::at_key(add_mixed::kernels, boost::hana::type_c<kernel_type<cpu, double>>).value ==
              -1.0);
static_assert(
    boost::hana::at_key(add_mixed::kernels,
                        boost::hana::type_c<kernel_type<npu, float, layout::nChw16c, library::onednn>>)
        .value == 7.0f);
}  // namespace

// A map of kernels that hold nothing answers Hana's map operations as one that stores them.
namespace hana = boost::hana;
constexpr auto onednn16 = hana::type_c<kernel_type<npu, float, layout::nChw16c, library::onednn>>;
static_assert(hana::contains(add_stateless::kernels, onednn16));
static_assert(!hana::contains(add_stateless::kernels, hana::type_c<kernel_type<npu, double>>));
static_assert(hana::length(add_stateless::kernels) == hana::size_c<8>);
static_assert(
    std::is_same_v<decltype(hana::keys(add_stateless::kernels)), decltype(hana::keys(add_mixed::kernels))>);
static_assert(std::is_same_v<std::remove_cvref_t<decltype(hana::at_key(add_stateless::kernels, onednn16))>,
                             conv_onednn<float>>);
static_assert(hana::is_just(hana::find(add_stateless::kernels, hana::type_c<kernel_type<cpu, double>>)));
static_assert(hana::is_nothing(hana::find(add_stateless::kernels,
                                          hana::type_c<kernel_type<cpu, std::int8_t>>)));
static_assert(hana::length(hana::values(add_stateless::kernels)) == hana::size_c<8>);
static_assert(hana::length(hana::erase_key(add_stateless::kernels, onednn16)) == hana::size_c<7>);
static_assert(hana::length(hana::insert(add_stateless::kernels,
                                        hana::make_pair(hana::type_c<kernel_type<npu, double>>,
                                                        conv_npu<double>{}))) == hana::size_c<9>);
static_assert(hana::unpack(add_stateless::kernels,
                           [](const auto&... entries) { return sizeof...(entries); }) == 8);
static_assert(hana::length(hana::drop_front(add_stateless::kernels.storage, hana::size_c<3>)) ==
              hana::size_c<5>);
static_assert(hana::is_empty(hana::drop_front(add_stateless::kernels.storage, hana::size_c<20>)));
// transform's function and remove_if's predicate see each entry itself, as at gives it (a
// function that takes an lvalue reference, a pointer that stays valid); concat keeps the kind.
constexpr auto stateless_storage = add_stateless::kernels.storage;
static_assert(hana::at_c<5>(hana::transform(stateless_storage, [](auto& entry) { return &entry; })) ==
              &hana::at_c<5>(stateless_storage));
static_assert(hana::length(hana::remove_if(stateless_storage, [](auto& entry) {
                return hana::first(entry) == onednn16;
              })) == hana::size_c<7>);
static_assert(boost::mp11::mp_similar<decltype(hana::concat(stateless_storage, stateless_storage)),
                                      detail::stateless_entries<>>::value);
static_assert(hana::length(hana::concat(stateless_storage, stateless_storage)) == hana::size_c<16>);
// A kernel that holds nothing and whose default constructor is explicit: its entry is made by a
// direct call of that constructor.
struct negate_explicit {
  using dtype = float;
  explicit negate_explicit() = default;
  void operator()(execution_context& ctx) const {
    Tensor out(ctx.input(0).dims(), data_type::float32);
    for (std::int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = -ctx.input(0).data<float>()[i];
    ctx.output(0) = std::move(out);
  }
};
struct negate_op {
  static constexpr std::string_view name = "negate_explicit";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(negate_explicit{}));
};
static_assert(boost::mp11::mp_similar<std::remove_cvref_t<decltype(negate_op::kernels)>::storage_type,
                                      detail::stateless_entries<>>::value);
// A group of no kernels (a backend left out of the build gives an empty tuple) keeps the map
// one of types.
struct add_with_empty_group {
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu>(conv_plain<float>{}), hana::make_basic_tuple(), kernels_on<npu>());
};
static_assert(
    boost::mp11::mp_similar<std::remove_cvref_t<decltype(add_with_empty_group::kernels)>::storage_type,
                            detail::stateless_entries<>>::value);
static_assert(hana::length(add_with_empty_group::kernels) == hana::size_c<1>);

TEST_CASE("a kernel that holds a value keeps it beside kernels that hold none", "[dispatch][static]") {
  // The runtime table keeps the address of each kernel: one object for each entry type.
  std::size_t visited = 0;
  hana::for_each(add_stateless::kernels, [&](const auto& entry) {
    CHECK(&hana::second(entry) == &hana::at_key(add_stateless::kernels, hana::first(entry)));
    ++visited;
  });
  CHECK(visited == 8);

  typed_tensor<cpu, float> x({3});
  for (int i = 0; i < 3; ++i) x.data()[i] = float(i);
  Tensor y;
  run<add_mixed>(target<cpu>(), inputs(x), outputs(y));
  for (int i = 0; i < 3; ++i) CHECK(y.data<float>()[i] == float(i) + 2.5f);
  const operator_info& info = register_operator<add_mixed>();
  Scope scope;
  scope.var("x").set(LoDTensor(x.tensor()));
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}};
  const std::vector<std::vector<Variable*>> out{{&scope.var("y")}};
  run_operator(info, cpu_place, in, out);
  for (int i = 0; i < 3; ++i) CHECK(scope.get("y").get<LoDTensor>().data<float>()[i] == float(i) + 2.5f);

  Tensor z;
  run<negate_op>(target<cpu>(), inputs(x), outputs(z));
  for (int i = 0; i < 3; ++i) CHECK(z.data<float>()[i] == -float(i));
  run_operator(register_operator<negate_op>(), cpu_place, in, out);
  for (int i = 0; i < 3; ++i) CHECK(scope.get("y").get<LoDTensor>().data<float>()[i] == -float(i));
}

TEST_CASE("Fluid's multi-kernel case: only the kernel of the expected key runs", "[dispatch]") {
  struct expectation {
    kernel_key expected;
    std::string kernel;
    data_layout layout;
  };
  const expectation cases[] = {
      {kernel_type<cpu, float>::key(), "cpu plain", data_layout::any},
      {kernel_type<cpu, double>::key(), "cpu plain", data_layout::any},
      {kernel_type<cpu, float, layout::any, library::onednn>::key(), "cpu onednn",
       data_layout_of<layout::nChw8c>},
      {kernel_type<npu, float>::key(1), "npu plain", data_layout::any},
      {kernel_type<npu, float, layout::any, library::cudnn>::key(1), "npu cudnn", data_layout::nchw},
  };
  for (const expectation& c : cases) {
    INFO(c.expected.to_string());
    const kernel_choice choice = select_and_call(conv_info, c.expected);
    CHECK(last_kernel == c.kernel);
    CHECK(choice.chosen.layout() == c.layout);
    CHECK(choice.chosen.with_layout(data_layout::any) == c.expected);  // the device id is kept
    CHECK_FALSE(choice.fell_back);
  }
  // The oneDNN kernel declared both blocked layouts: the input's own layout is preferred.
  CHECK(select_and_call(conv_info, kernel_type<cpu, float, layout::nChw16c, library::onednn>::key())
            .chosen.layout() == data_layout_of<layout::nChw16c>);
  // The same selections at compile time.
  using input = typed_tensor<cpu, float, layout::nchw>;
  static_assert(std::is_same_v<static_kernel_type<conv2d, target<npu, library::cudnn>, input, input>,
                               kernel_type<npu, float, layout::nchw, library::cudnn>>);
  static_assert(
      std::is_same_v<static_kernel_type<conv2d, target<npu>, input, input>, kernel_type<npu, float>>);
  static_assert(std::is_same_v<static_kernel_type<conv2d, target<cpu, library::onednn>, input, input>,
                               kernel_type<cpu, float, layout::nChw8c, library::onednn>>);
  static_assert(std::is_same_v<static_kernel_type<conv2d, target<cpu, library::onednn>,
                                                  typed_tensor<cpu, float, layout::nChw16c>, input>,
                               kernel_type<cpu, float, layout::nChw16c, library::onednn>>);
  static_assert(std::is_same_v<
                static_kernel_type<conv2d, target<cpu>, typed_tensor<cpu, double>, typed_tensor<cpu, double>>,
                kernel_type<cpu, double>>);
}

#if defined(FLUIDK_HAS_CUDA) && FLUIDK_HAS_CUDA
namespace {
template <class T>
struct conv_cuda {
  using dtype = T;
  void operator()(execution_context&) const {}
};
template <class T>
struct conv_cudnn {
  using dtype = T;
  void operator()(execution_context&) const {}
};
struct conv2d_cuda {
  static constexpr std::string_view name = "conv2d_cuda_test";
  static constexpr std::array<std::string_view, 1> inputs{"Input"};
  static constexpr std::array<std::string_view, 1> outputs{"Output"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(conv_plain<float>{}),
                                               fluidk::kernels_on<cpu, library::onednn>(conv_onednn<float>{}),
                                               fluidk::kernels_on<cuda>(conv_cuda<float>{}),
                                               fluidk::kernels_on<cuda, library::cudnn>(conv_cudnn<float>{}));
};
}  // namespace

TEST_CASE("with CUDA compiled in, an expected key of CUDA + cuDNN selects the cuDNN kernel",
          "[dispatch][cuda]") {
  const operator_info& op = register_operator<conv2d_cuda>();
  const kernel_choice choice =
      choose_kernel(op, kernel_type<cuda, float, layout::any, library::cudnn>::key(0));
  CHECK(choice.chosen == kernel_type<cuda, float, layout::any, library::cudnn>::key());
  CHECK(choice.entry->kernel ==
        &boost::hana::at_key(conv2d_cuda::kernels,
                             boost::hana::type_c<kernel_type<cuda, float, layout::any, library::cudnn>>));
  using input = typed_tensor<cpu, float, layout::nchw>;
  static_assert(std::is_same_v<static_kernel_type<conv2d_cuda, target<cuda, library::cudnn>, input>,
                               kernel_type<cuda, float, layout::any, library::cudnn>>);
}
#endif

TEST_CASE("the runtime table is generated from the same map, and listed", "[dispatch][registry]") {
  CHECK(conv_info.kernels().size() == 6);
  CHECK(&find_operator("conv2d_test") == &conv_info);
  CHECK(&register_operator<conv2d>() == &conv_info);  // registering again changes nothing
  const auto list = operator_registry::instance().list();
  std::size_t conv_entries = 0;
  for (const auto& [name, key] : list) conv_entries += name == "conv2d_test";
  CHECK(conv_entries == 6);
  CHECK(std::is_sorted(list.begin(), list.end()));
  CHECK_THROWS_WITH(find_operator("conv3d"), Catch::Contains("unknown operator 'conv3d'; registered: ") &&
                                                 Catch::Contains("conv2d_test"));
  CHECK_THROWS_WITH(
      choose_kernel(conv_info, kernel_type<cpu, std::int8_t>::key()),
      Catch::Contains("Operator (conv2d_test) does not have kernel for {data_type[int8_t]; "
                      "data_layout[ANY_LAYOUT]; place[Place(cpu)]; library_type[PLAIN]}; registered: ") &&
          Catch::Contains("{data_type[float]; data_layout[nChw8c]; place[Place(cpu)]; "
                          "library_type[ONEDNN]}"));
}

TEST_CASE("the major data type: inputs agree, or the operator names the input that decides",
          "[dispatch][dtype]") {
  const Tensor f = filled({2, 3}, data_type::float32);
  const Tensor d = filled({2, 3}, data_type::float64);
  const Tensor labels = filled({2}, data_type::int64);
  const std::vector<std::vector<Variable*>> agree{{held(d)}, {held(d)}};
  CHECK(expected_kernel_key(conv_info, cpu_place, agree).dtype() == data_type::float64);
  const std::vector<std::vector<Variable*>> disagree{{held(f)}, {held(d)}};
  CHECK_THROWS_WITH(
      expected_kernel_key(conv_info, cpu_place, disagree),
      Catch::Contains("operator 'conv2d_test': its inputs disagree on the data type (Input is float, "
                      "Filter is double)"));
  const std::vector<std::vector<Variable*>> logits_labels{{held(f)}, {held(labels)}};
  const kernel_key expected = expected_kernel_key(cross_entropy_info, cpu_place, logits_labels);
  CHECK(expected == kernel_type<cpu, float>::key());
  select_and_call(cross_entropy_info, expected);
  CHECK(last_kernel == "cross_entropy float");
  const std::vector<std::vector<Variable*>> none{{nullptr}, {nullptr}};
  CHECK_THROWS_WITH(expected_kernel_key(conv_info, cpu_place, none),
                    Catch::Contains("no input that decides the data type holds data"));
}

TEST_CASE("exempt inputs are never transformed; cast inputs are", "[dispatch][inputs]") {
  Scope scope;
  scope.var("logits").set(LoDTensor(filled({2, 3}, data_type::float32)));
  scope.var("labels").set(LoDTensor(filled({2}, data_type::int64)));
  Variable& loss = scope.var("loss");
  const std::vector<std::vector<Variable*>> in{{&scope.get("logits")}, {&scope.get("labels")}};
  const std::vector<std::vector<Variable*>> out{{&loss}};
  // On the accelerator: the logits move there, the labels stay on the host.
  const kernel_choice choice = run_operator(cross_entropy_info, place::of<npu>(1), in, out);
  CHECK(choice.chosen == kernel_type<npu, float>::key(1));
  CHECK(same_kernel(choice.chosen, kernel_type<npu, float>::key()));
  CHECK(
      input_target_key(cross_entropy_info, 0, scope.get("logits").get<LoDTensor>(), choice.chosen).place() ==
      place::of<npu>(1));
  CHECK(input_target_key(cross_entropy_info, 1, scope.get("labels").get<LoDTensor>(), choice.chosen) ==
        key_of(scope.get("labels").get<LoDTensor>()));
  CHECK(scope.get("logits").get<LoDTensor>().place() == cpu_place);  // the sources are untouched

  scope.var("x").set(LoDTensor(filled({4}, data_type::float32)));
  scope.var("y").set(LoDTensor(filled({4}, data_type::float64)));
  const std::vector<std::vector<Variable*>> xy{{&scope.get("x")}, {&scope.get("y")}};
  run_operator(add_cast_info, cpu_place, xy, out);
  CHECK(last_kernel == "float+float");
  CHECK(scope.get("y").get<LoDTensor>().dtype() == data_type::float64);
}

namespace {
// A blocked-layout kernel whose filter keeps its layout: it records the layouts it got.
template <class T>
struct blocked_conv_kernel {
  using dtype = T;
  using layouts = boost::mp11::mp_list<layout::nChw8c>;
  void operator()(execution_context& ctx) const {
    last_kernel =
        std::string(name_of(ctx.input(0).layout())) + "+" + std::string(name_of(ctx.input(1).layout()));
  }
};
struct blocked_conv {
  static constexpr std::string_view name = "keep_layout_test";
  static constexpr std::array<std::string_view, 2> inputs{"Input", "Filter"};
  static constexpr std::array<std::string_view, 1> outputs{"Output"};
  static constexpr std::array<std::string_view, 1> keep_layout_inputs{"Filter"};
  static constexpr auto kernels =
      make_kernels(kernels_on<cpu, library::onednn>(blocked_conv_kernel<float>{}));
};
}  // namespace

TEST_CASE("keep_layout inputs move and cast but keep their layout, on both paths", "[dispatch][inputs]") {
  const operator_info& op = register_operator<blocked_conv>();
  Scope scope;
  scope.var("x").set(LoDTensor(filled({1, 3, 2, 2}, data_type::float32, cpu_place, data_layout::nchw)));
  scope.var("w").set(LoDTensor(filled({4, 3, 1, 1}, data_type::float32, cpu_place, data_layout::nchw)));
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}, {&scope.get("w")}};
  const std::vector<std::vector<Variable*>> out{{&scope.var("y")}};
  last_kernel.clear();
  run_operator(op, cpu_place, in, out, {{"use_onednn", true}});
  CHECK(last_kernel == "nChw8c+NCHW");
  CHECK(input_target_key(op, 1, scope.get("w").get<LoDTensor>(),
                         kernel_type<cpu, float, layout::nChw8c, library::onednn>::key())
            .layout() == data_layout::nchw);

  typed_tensor<cpu, float, layout::nchw> x({1, 3, 2, 2}), w({4, 3, 1, 1});
  Tensor y;
  last_kernel.clear();
  run<blocked_conv>(target<cpu, library::onednn>(), inputs(x, w), outputs(y));
  CHECK(last_kernel == "nChw8c+NCHW");
}

TEST_CASE("configuration forces a library; an operator may force its place", "[dispatch][config]") {
  const Tensor x = filled({1, 8, 2, 2}, data_type::float32, cpu_place, data_layout::nchw);
  const std::vector<std::vector<Variable*>> in{{held(x)}, {held(x)}};
  CHECK(expected_kernel_key(conv_info, cpu_place, in, {{"use_onednn", true}}).library() ==
        library_type_of<library::onednn>);
  CHECK(expected_kernel_key(conv_info, cpu_place, in, {{"use_mkldnn", true}}).library() ==
        library_type_of<library::onednn>);
  CHECK(expected_kernel_key(conv_info, place::of<npu>(0), in, {{"use_cudnn", true}}).library() ==
        library_type_of<library::cudnn>);
  CHECK(expected_kernel_key(conv_info, cpu_place, in, {{"op_device", std::string("acc:1")}}).place() ==
        place::of<npu>(1));
  CHECK_THROWS_WITH(expected_kernel_key(conv_info, cpu_place, in, {{"use_onednn", std::int32_t(1)}}),
                    Catch::Contains("operator 'conv2d_test' attribute 'use_onednn' holds int, not bool"));
  // crf_decoding inside an accelerator program still runs on the CPU.
  const std::vector<std::vector<Variable*>> one{{held(x)}};
  CHECK(expected_kernel_key(crf_info, place::of<npu>(0), one).place() == cpu_place);
  using npu_input = typed_tensor<npu, float>;
  static_assert(
      std::is_same_v<static_kernel_type<crf_decoding, target<npu>, npu_input>, kernel_type<cpu, float>>);

  // An operator that runs on the accelerator runs on the program's accelerator device, on
  // both paths, and on device 0 from a CPU program.
  const npu_input on1({3}, 1);
  const std::vector<std::vector<Variable*>> at1{{held(on1.tensor())}};
  Variable result("out");
  const std::vector<std::vector<Variable*>> outs{{&result}};
  for (const place& where : {place::of<npu>(1), cpu_place}) {
    const place expected = where == cpu_place ? place::of<npu>(0) : where;
    CHECK(expected_kernel_key(on_npu_info, where, at1).place() == expected);
    CHECK(run_operator(on_npu_info, where, at1, outs).chosen.place() == expected);
    CHECK(last_key.place() == expected);
  }
  Tensor y;
  run<on_npu>(target<npu>(1), inputs(on1), outputs(y));
  CHECK(last_key.place() == place::of<npu>(1));
  run<on_npu>(target<cpu>(), inputs(on1), outputs(y));
  CHECK(last_key.place() == place::of<npu>(0));

  // op_device of the wrong kind, or naming no place, is an error naming the operator.
  CHECK_THROWS_WITH(expected_kernel_key(conv_info, cpu_place, in, {{"op_device", std::int32_t(1)}}),
                    Catch::Contains("operator 'conv2d_test' attribute 'op_device' holds int, not string"));
  CHECK_THROWS_WITH(expected_kernel_key(conv_info, cpu_place, in, {{"op_device", std::string("nosuch:0")}}),
                    Catch::Contains("operator 'conv2d_test' attribute 'op_device': ") &&
                        Catch::Contains("unknown place 'nosuch:0'"));
  CHECK(expected_kernel_key(conv_info, cpu_place, in, {{"op_device", std::string()}}).place() == cpu_place);

  // op_device naming a device past the count (the accelerator has 2): the call fails before
  // its inputs move or its outputs change, naming the operator, the kernel and the attribute;
  // explain says the call would fail.
  const attribute_map absent{{"op_device", std::string("acc:5")}};
  const std::uint64_t before = result.version();
  CHECK_THROWS_WITH(
      run_operator(conv_info, cpu_place, in, outs, absent),
      Catch::Contains("operator 'conv2d_test' kernel {") && Catch::Contains("place[Place(acc:5)]") &&
          Catch::Contains("(the place attribute 'op_device' asks for): no device Place(acc:5): 2 "
                          "device(s) of kind 'acc' present"));
  CHECK(result.version() == before);
  CHECK_THAT(explain(conv_info, cpu_place, in, absent),
             Catch::Contains("device:   none (Place(acc:5) is not present: 2 device(s) of its kind)"));
}

TEST_CASE("a call with the wrong number of slots is refused before a slot is read", "[dispatch][errors]") {
  const Tensor x = filled({1, 8, 2, 2}, data_type::float32, cpu_place, data_layout::nchw);
  const Tensor d = filled({1, 8, 2, 2}, data_type::float64, cpu_place, data_layout::nchw);
  // conv2d_test takes two input slots and one output slot.
  const std::vector<std::vector<Variable*>> three{{held(x)}, {held(x)}, {held(d)}}, two{{held(x)}, {held(x)}},
      one{{held(x)}};
  Variable result("out");
  const std::vector<std::vector<Variable*>> outs{{&result}}, no_outs{};
  const auto takes = Catch::Contains("operator 'conv2d_test' takes 2 input");
  CHECK_THROWS_WITH(expected_kernel_key(conv_info, cpu_place, three),
                    "fluidk: operator 'conv2d_test' takes 2 input slots, but was given 3");
  CHECK_THROWS_WITH(expected_kernel_key(conv_info, cpu_place, one), takes);
  CHECK_THROWS_WITH(explain(conv_info, cpu_place, three), takes);
  CHECK_THROWS_WITH(run_operator(conv_info, cpu_place, three, outs),
                    "fluidk: operator 'conv2d_test' takes 2 input and 1 output slots, but was given 3 and 1");
  CHECK_THROWS_WITH(run_operator(conv_info, cpu_place, two, no_outs),
                    "fluidk: operator 'conv2d_test' takes 2 input and 1 output slots, but was given 2 and 0");
}

TEST_CASE("the static path refuses attributes that ask for another place or library", "[dispatch][config]") {
  typed_tensor<cpu, float, layout::nchw> x({1, 8, 2, 2});
  const std::uint64_t version = x.tensor().version();
  Tensor y;
  last_kernel.clear();
  CHECK_THROWS_WITH(run<conv2d>(target<cpu>(), inputs(x, x), outputs(y), {{"use_onednn", true}}),
                    Catch::Contains("operator 'conv2d_test': attribute 'use_onednn' asks for library ONEDNN "
                                    "but the static call runs it with library PLAIN, its target's"));
  CHECK_THROWS_WITH(
      run<conv2d>(target<cpu>(), inputs(x, x), outputs(y), {{"op_device", std::string("acc:1")}}),
      Catch::Contains("operator 'conv2d_test': attribute 'op_device' asks for Place(acc:1) but "
                      "the static call runs it on Place(cpu), its target's place"));
  CHECK(last_kernel.empty());  // nothing ran
  CHECK(!y.initialized());
  CHECK(x.tensor().version() == version);
  // Attributes that agree with the target, or ask for nothing, are accepted.
  run<conv2d>(target<cpu, library::onednn>(), inputs(x, x), outputs(y), {{"use_onednn", true}});
  CHECK(last_kernel == "cpu onednn");
  run<conv2d>(target<cpu>(), inputs(x, x), outputs(y),
              {{"op_device", std::string("cpu")}, {"use_onednn", false}});
  CHECK(last_kernel == "cpu plain");
  // An operator that always runs on the CPU ignores op_device on both paths.
  run<crf_decoding>(target<cpu>(), inputs(x), outputs(y), {{"op_device", std::string("acc:1")}});
  CHECK(last_kernel == "scale cpu");
}

TEST_CASE("fallback: an error without a policy but for a library request, counted and reported once",
          "[dispatch][fallback]") {
  Scope scope;
  scope.var("x").set(LoDTensor(filled({3}, data_type::float32, place::of<npu>(0))));
  Variable& out = scope.var("out");
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}};
  const std::vector<std::vector<Variable*>> outs{{&out}};

  CHECK_THROWS_WITH(
      run_operator(scale_none_info, place::of<npu>(0), in, outs),
      Catch::Contains("Operator (scale_no_fallback) does not have kernel for {data_type[float]; "
                      "data_layout[ANY_LAYOUT]; place[Place(acc:0)]; library_type[PLAIN]}; registered: "
                      "{data_type[float]; data_layout[ANY_LAYOUT]; place[Place(cpu)]"));

  std::vector<std::string> reports;
  operator_registry::instance().set_fallback_reporter([&](const fallback_event& e) {
    reports.push_back(std::string(e.op) + ": " + e.expected.to_string() + " -> " + e.chosen.to_string());
  });
  for (int i = 0; i < 3; ++i) {
    const kernel_choice choice = run_operator(scale_fallback_info, place::of<npu>(0), in, outs);
    CHECK(choice.fell_back);
    CHECK(choice.chosen == kernel_type<cpu, float>::key());
  }
  CHECK(out.get<LoDTensor>().place() == cpu_place);
  for (int i = 0; i < 3; ++i) CHECK(out.get<LoDTensor>().data<float>()[i] == float(2 * i));
  CHECK(scope.get("x").get<LoDTensor>().place() == place::of<npu>(0));  // the input itself stays
  REQUIRE(reports.size() == 1);
  CHECK(reports[0] ==
        "scale_with_fallback: {data_type[float]; data_layout[ANY_LAYOUT]; place[Place(acc:0)]; "
        "library_type[PLAIN]} -> {data_type[float]; data_layout[ANY_LAYOUT]; place[Place(cpu)]; "
        "library_type[PLAIN]}");
  CHECK(operator_registry::instance().fallback_count("scale_with_fallback", kernel_type<npu, float>::key()) ==
        3);

  // From oneDNN to the plain kernel on the same place.
  const kernel_key onednn_float = kernel_type<cpu, float, layout::any, library::onednn>::key();
  CHECK(choose_kernel(scale_fallback_info, onednn_float).chosen == kernel_type<cpu, float>::key());
  // So too without a policy (none): a library request is a preference, as in Fluid, counted
  // and reported once as the CPU fallback is.
  reports.clear();
  for (int i = 0; i < 2; ++i) {
    const kernel_choice choice = choose_kernel(scale_none_info, onednn_float);
    CHECK(choice.chosen == kernel_type<cpu, float>::key());
    CHECK(choice.fell_back);
  }
  REQUIRE(reports.size() == 1);
  CHECK(reports[0] == "scale_no_fallback: " + onednn_float.to_string() + " -> " +
                          kernel_type<cpu, float>::key().to_string());
  CHECK(operator_registry::instance().fallback_count("scale_no_fallback", onednn_float) == 2);
  static_assert(
      std::is_same_v<static_kernel_type<scale_none, target<cpu, library::onednn>, typed_tensor<cpu, float>>,
                     kernel_type<cpu, float>>);
  // The global policy: none turns the CPU fallback off and keeps the library one; strict turns
  // every fallback off; cpu turns them on.
  operator_registry::instance().set_global_fallback(fallback_policy::none);
  CHECK_THROWS_AS(run_operator(scale_fallback_info, place::of<npu>(0), in, outs), not_registered);
  CHECK(choose_kernel(scale_fallback_info, onednn_float).fell_back);
  operator_registry::instance().set_global_fallback(fallback_policy::strict);
  CHECK_THROWS_AS(run_operator(scale_fallback_info, place::of<npu>(0), in, outs), not_registered);
  CHECK_THROWS_AS(choose_kernel(scale_fallback_info, onednn_float), not_registered);
  CHECK_THROWS_AS(choose_kernel(scale_none_info, onednn_float), not_registered);
  CHECK_FALSE(choose_kernel(scale_none_info, kernel_type<cpu, float>::key()).fell_back);
  operator_registry::instance().set_global_fallback(fallback_policy::cpu);
  CHECK(choose_kernel(scale_none_info, kernel_type<npu, double>::key()).fell_back);
  operator_registry::instance().set_global_fallback(std::nullopt);
  operator_registry::instance().set_fallback_reporter(nullptr);

  // Statically, the policy picks the CPU kernel at compile time and the input moves.
  using npu_input = typed_tensor<npu, float>;
  static_assert(
      std::is_same_v<static_kernel_type<scale_fallback, target<npu>, npu_input>, kernel_type<cpu, float>>);
  static_assert(std::is_void_v<static_kernel_type<scale_none, target<npu>, npu_input>>);
  const npu_input x = tensor_cast<npu, float>(scope.get("x").get<LoDTensor>());
  Tensor y;
  run<scale_fallback>(target<npu>(0), inputs(x), outputs(y));
  CHECK(y.place() == cpu_place);
  CHECK(y.data<float>()[2] == 4.f);
  // A static fallback is counted with the runtime ones, and reported once, on the device the
  // call was made for.
  CHECK(operator_registry::instance().fallback_count("scale_with_fallback", kernel_type<npu, float>::key()) ==
        4);
  reports.clear();
  operator_registry::instance().set_fallback_reporter([&](const fallback_event& e) {
    reports.push_back(std::string(e.op) + ": " + e.expected.to_string() + " -> " + e.chosen.to_string());
  });
  const npu_input x1({3}, 1);
  for (int i = 0; i < 2; ++i) run<scale_fallback>(target<npu>(1), inputs(x1), outputs(y));
  operator_registry::instance().set_fallback_reporter(nullptr);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0] ==
        "scale_with_fallback: {data_type[float]; data_layout[ANY_LAYOUT]; place[Place(acc:1)]; "
        "library_type[PLAIN]} -> {data_type[float]; data_layout[ANY_LAYOUT]; place[Place(cpu)]; "
        "library_type[PLAIN]}");
  CHECK(operator_registry::instance().fallback_count("scale_with_fallback",
                                                     kernel_type<npu, float>::key(1)) == 2);
}

TEST_CASE("the static path runs the kernel the runtime path runs, with the same result",
          "[dispatch][static]") {
  typed_tensor<cpu, double> x({5});
  for (int i = 0; i < 5; ++i) x.data()[i] = i * 1.5;
  Tensor y;
  run<scale_none>(target<cpu>(), inputs(x), outputs(y));
  CHECK(last_key == kernel_type<cpu, double>::key());
  Scope scope;
  scope.var("x").set(LoDTensor(x.tensor()));
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}};
  const std::vector<std::vector<Variable*>> out{{&scope.var("y")}};
  run_operator(scale_none_info, cpu_place, in, out);
  for (int i = 0; i < 5; ++i) CHECK(scope.get("y").get<LoDTensor>().data<double>()[i] == y.data<double>()[i]);
}

TEST_CASE("an input the kernel reads as it is keeps its layout on both paths, moved or not",
          "[dispatch][inputs][regression]") {
  // Data of ANY for an NCHW kernel of a kind with device ids: passed as it is on its own
  // device, copied without a new label from another (Fluid transforms no layout from
  // kAnyLayout), whatever its rank. The static path once relabelled it NCHW, and refused rank 2.
  Variable result("out");
  const std::vector<std::vector<Variable*>> outs{{&result}};
  for (const dims& shape : {dims{1, 2, 2, 2}, dims{5, 2}})
    for (int device : {0, 1}) {
      INFO("shape " << shape << " on device " << device);
      const Tensor x = filled(shape, data_type::float32, place::of<npu>(device));
      REQUIRE(x.layout() == data_layout::any);
      const std::vector<std::vector<Variable*>> in{{held(x)}};
      last_kernel.clear();
      run_operator(nchw_on_npu_info, place::of<npu>(0), in, outs);
      CHECK(last_kernel == "ANY_LAYOUT on Place(acc:0)");
      last_kernel.clear();
      Tensor y;
      run<nchw_on_npu>(target<npu>(0), inputs(tensor_cast<npu, float>(x)), outputs(y));
      CHECK(last_kernel == "ANY_LAYOUT on Place(acc:0)");
      CHECK(
          input_target_key(nchw_on_npu_info, 0, x, kernel_type<npu, float, layout::nchw>::key(0)).layout() ==
          data_layout::any);
    }
}

namespace {
// An NHWC kernel on the CPU that records the layout and the values of X as it reads them.
std::vector<float> nhwc_values;
struct nhwc_seen {
  using dtype = float;
  using layouts = boost::mp11::mp_list<layout::nhwc>;
  void operator()(execution_context& ctx) const {
    const Tensor& x = ctx.input("X");
    last_kernel =
        std::string(name_of(x.layout())) + ", Bias " + std::string(name_of(ctx.input("Bias").layout()));
    nhwc_values.assign(x.data<float>(), x.data<float>() + x.numel());
  }
};
struct nhwc_op {
  static constexpr std::string_view name = "nhwc_test";
  static constexpr std::array<std::string_view, 2> inputs{"X", "Bias"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::array<std::string_view, 1> keep_layout_inputs{"Bias"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(nhwc_seen{}));
};
}  // namespace

TEST_CASE(
    "data of ANY is read in its logical order: reordered for an NHWC kernel, of its rank or refused "
    "clearly, the same on every path",
    "[dispatch][inputs][errors][regression]") {
  const operator_info& op = register_operator<nhwc_op>();
  const Tensor bias = filled({2}, data_type::float32);  // rank 1, kept as it is (keep_layout_inputs)
  Variable result("out");
  const std::vector<std::vector<Variable*>> outs{{&result}};
  // Rank 4: [1, 2, 1, 3] holds 0..5 in the logical order, which the NHWC kernel reads reordered.
  const Tensor x4 = filled({1, 2, 1, 3}, data_type::float32);
  const std::vector<float> nhwc_order{0, 3, 1, 4, 2, 5};
  const std::vector<std::vector<Variable*>> in4{{held(x4)}, {held(bias)}};
  run_operator(op, cpu_place, in4, outs);
  CHECK(last_kernel == "NHWC, Bias ANY_LAYOUT");
  CHECK(nhwc_values == nhwc_order);
  nhwc_values.clear();
  Tensor y;
  run<nhwc_op>(target<cpu>(), inputs(tensor_cast<cpu, float>(x4), tensor_cast<cpu, float>(bias)), outputs(y));
  CHECK(last_kernel == "NHWC, Bias ANY_LAYOUT");
  CHECK(nhwc_values == nhwc_order);

  // Rank 2: no rank-4 order to read it in. Every path refuses it before the kernel runs, naming
  // the operator, the input and the kernel, and what the data was read as (once an error about
  // an NCHW tensor that did not exist); explain says the call would fail (it said it would
  // transform).
  const Tensor x2 = filled({2, 3}, data_type::float32);
  Variable x2_var("x2");
  x2_var.set(LoDTensor(x2));
  const std::vector<std::vector<Variable*>> in2{{&x2_var}, {held(bias)}};
  const std::uint64_t before = result.version();
  last_kernel.clear();
  // The message of what `call` throws; empty when it throws nothing.
  const auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const error& e) {
      return e.what();
    }
    return {};
  };
  const std::string runtime_message = message_of([&] { run_operator(op, cpu_place, in2, outs); });
  CHECK_THAT(runtime_message,
             Catch::StartsWith("fluidk: operator 'nhwc_test' input X ('x2') for kernel {data_type[float]; "
                               "data_layout[NHWC]") &&
                 Catch::Contains("data of layout ANY_LAYOUT is in its logical order, read as NCHW") &&
                 Catch::Contains("NCHW needs rank 4: the shape [2, 3] has rank 2") &&
                 Catch::Contains("keep_layout_inputs"));
  // The static call says the same, but for the variable it does not have.
  std::string static_message = message_of([&] {
    run<nhwc_op>(target<cpu>(), inputs(tensor_cast<cpu, float>(x2), tensor_cast<cpu, float>(bias)),
                 outputs(y));
  });
  CHECK(static_message.find(" ('x2')") == std::string::npos);
  const std::string::size_type slot_end = std::string("fluidk: operator 'nhwc_test' input X").size();
  CHECK(static_message.insert(std::min(slot_end, static_message.size()), " ('x2')") == runtime_message);
  Scope scope;
  scope.var("x2").set(LoDTensor(x2));
  scope.var("bias").set(LoDTensor(bias));
  Executor executor(cpu_place);
  CHECK(message_of([&] {
          executor.run(
              std::vector<op_invocation>{
                  {"nhwc_test", {{"X", {"x2"}}, {"Bias", {"bias"}}}, {{"Out", {"y"}}}, {}}},
              scope);
        }) == runtime_message);
  CHECK(last_kernel.empty());
  CHECK(result.version() == before);
  CHECK_THAT(
      explain(op, cpu_place, in2),
      Catch::Contains("input X[0]: none (data of layout ANY_LAYOUT is in its logical order, read as NCHW") &&
          Catch::Contains("); the call would fail") && Catch::Contains("input Bias[0]: none\n"));
}

TEST_CASE("explain says what a call does", "[dispatch][explain]") {
  const Tensor x = filled({1, 3, 2, 2}, data_type::float32, cpu_place, data_layout::nchw);
  const std::vector<std::vector<Variable*>> in{{held(x)}, {held(x)}};
  const std::string text = explain(conv_info, cpu_place, in, {{"use_onednn", true}});
  CHECK_THAT(text, Catch::Contains("expected: {data_type[float]; data_layout[NCHW]; place[Place(cpu)]; "
                                   "library_type[ONEDNN]}") &&
                       Catch::Contains("kernel:   {data_type[float]; data_layout[nChw8c]; place[Place(cpu)]; "
                                       "library_type[ONEDNN]}") &&
                       Catch::Contains("input Input[0]: layout NCHW->nChw8c on Place(cpu)"));
  const std::vector<std::vector<Variable*>> one{{held(x)}};
  CHECK_THAT(explain(scale_fallback_info, place::of<npu>(0), one), Catch::Contains("(fallback)"));
  CHECK_THAT(explain(scale_none_info, place::of<npu>(0), one),
             Catch::Contains("kernel:   none (no kernel for"));
  // A LoDTensorArray input: each element's plan.
  Variable array("array");
  array.set(LoDTensorArray{LoDTensor(x), LoDTensor(x)});
  const std::vector<std::vector<Variable*>> arrays{{&array}, {held(x)}};
  CHECK_THAT(explain(conv_info, cpu_place, arrays, {{"use_onednn", true}}),
             Catch::Contains("input Input[0][0]: layout NCHW->nChw8c on Place(cpu)") &&
                 Catch::Contains("input Input[0][1]: layout NCHW->nChw8c on Place(cpu)"));
}

TEST_CASE("many threads dispatch concurrently on the shared registry", "[dispatch][threads]") {
  std::atomic<int> calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Scope scope;
      scope.var("x").set(LoDTensor(filled({8}, t % 2 ? data_type::float64 : data_type::float32)));
      const std::vector<std::vector<Variable*>> in{{&scope.get("x")}};
      const std::vector<std::vector<Variable*>> out{{&scope.var("y")}};
      for (int i = 0; i < 200; ++i) {
        run_operator(t == 3 ? scale_fallback_info : scale_none_info, cpu_place, in, out);
        const kernel_key expected = t % 2 ? kernel_type<cpu, double>::key() : kernel_type<cpu, float>::key();
        if (choose_kernel(conv_info, expected).entry != nullptr) ++calls;
      }
    });
  for (auto& thread : threads) thread.join();
  CHECK(calls == 800);
}

namespace {
struct fresh_table_op {
  static constexpr std::string_view name = "fresh_table_test";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr fallback_policy fallback = fallback_policy::cpu;
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(scale_cpu<float>{}, scale_cpu<double>{}),
                                               fluidk::kernels_on<npu>(conv_npu<float>{}));
};
}  // namespace

TEST_CASE("the runtime table is filled on first use, concurrently, the same for every thread",
          "[dispatch][threads]") {
  const operator_info& op = register_operator<fresh_table_op>();
  operator_registry::instance().set_fallback_reporter([](const fallback_event&) {});
  std::atomic<int> agree{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        const kernel_key expected =
            t % 2 ? kernel_type<npu, double>::key(1) : kernel_type<npu, float>::key(1);
        const kernel_choice choice = choose_kernel(op, expected);
        const kernel_key want = t % 2 ? kernel_type<cpu, double>::key() : kernel_type<npu, float>::key(1);
        if (choice.chosen == want && choice.fell_back == (t % 2 == 1)) ++agree;
      }
    });
  for (auto& thread : threads) thread.join();
  operator_registry::instance().set_fallback_reporter(nullptr);
  CHECK(agree == 400);
}

namespace {
// Operators registered while other threads look names up: enough of them that the name
// index grows (it starts with 16 slots) several times during the lookups.
template <int I>
struct late_op {
  static constexpr std::array<char, 12> spelled{'l',
                                                'a',
                                                't',
                                                'e',
                                                '_',
                                                'o',
                                                'p',
                                                '_',
                                                char('0' + I / 100),
                                                char('0' + I / 10 % 10),
                                                char('0' + I % 10),
                                                '\0'};
  static constexpr std::string_view name{spelled.data(), 11};
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(scale_cpu<float>{}));
};
template <int... I>
void register_late_ops(std::integer_sequence<int, I...>) {
  (register_operator<late_op<I>>(), ...);
}
}  // namespace

TEST_CASE("operators are found by name while others register, without a lock", "[dispatch][threads]") {
  constexpr int count = 96;
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&] {
      // Every name already registered is found and gives its own operator; an unknown one is
      // never found; a late one is either not there yet or the right operator.
      while (!done.load(std::memory_order_acquire)) {
        const operator_info* conv = operator_registry::instance().find("conv2d_test");
        if (conv != &conv_info) ++wrong;
        if (operator_registry::instance().find("no_such_operator") != nullptr) ++wrong;
        for (int i = 0; i < count; i += 7) {
          const std::string name =
              "late_op_" + std::string(1, char('0' + i / 100)) + char('0' + i / 10 % 10) + char('0' + i % 10);
          if (const operator_info* op = operator_registry::instance().find(name); op && op->name() != name)
            ++wrong;
        }
      }
    });
  register_late_ops(std::make_integer_sequence<int, count>{});
  done.store(true, std::memory_order_release);
  for (auto& reader : readers) reader.join();
  CHECK(wrong == 0);
  for (int i = 0; i < count; ++i) {
    const std::string name =
        "late_op_" + std::string(1, char('0' + i / 100)) + char('0' + i / 10 % 10) + char('0' + i % 10);
    const operator_info* op = operator_registry::instance().find(name);
    REQUIRE(op != nullptr);
    CHECK(op->name() == name);
  }
  CHECK(operator_registry::instance().find("late_op_") == nullptr);
  CHECK(operator_registry::instance().find("") == nullptr);
}

namespace {
// A kernel that lets out the exception attribute "throw" names.
struct throwing_cpu {
  using dtype = float;
  void operator()(execution_context& ctx) const {
    const std::string what = std::get<std::string>(*ctx.attributes().find("throw"));
    if (what == "error") throw error("variable 'x' holds SelectedRows, not LoDTensor");
    if (what == "not_registered") throw not_registered("no transform from A to B");
    if (what == "named") throw error("operator 'throwing_test': X is too short");
    if (what == "allocation") throw allocation_error(cpu_place, 64, "out of memory");
    throw std::logic_error("a kernel's own exception");
  }
};
struct throwing_op {
  static constexpr std::string_view name = "throwing_test";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(throwing_cpu{}));
};
}  // namespace

TEST_CASE("an error a kernel lets out names the operator and the kernel, and keeps its type",
          "[dispatch][errors]") {
  const operator_info& op = register_operator<throwing_op>();
  Scope scope;
  scope.var("x").set(LoDTensor(filled({2}, data_type::float32)));
  const std::vector<std::vector<Variable*>> in{{&scope.get("x")}}, out{{&scope.var("out")}};
  auto run = [&](const std::string& what) { run_operator(op, cpu_place, in, out, {{"throw", what}}); };
  const std::string kernel = "operator 'throwing_test', kernel " + kernel_type<cpu, float>::key().to_string();
  CHECK_THROWS_MATCHES(
      run("error"), error,
      Catch::Message("fluidk: " + kernel + ": variable 'x' holds SelectedRows, not LoDTensor"));
  CHECK_THROWS_MATCHES(run("not_registered"), not_registered,
                       Catch::Message("fluidk: " + kernel + ": no transform from A to B"));
  // An allocation_error keeps its place and size (it once left without the operator's name).
  try {
    run("allocation");
    FAIL("the kernel did not throw");
  } catch (const allocation_error& e) {
    CHECK(e.what() ==
          "fluidk: " + kernel + ": cannot allocate 64 bytes on " + cpu_place.to_string() + ": out of memory");
    CHECK(e.bytes() == 64);
    CHECK(e.where() == cpu_place);
  }
  // A message that names the operator already and an exception of another type leave as they are.
  CHECK_THROWS_MATCHES(run("named"), error,
                       Catch::Message("fluidk: operator 'throwing_test': X is too short"));
  CHECK_THROWS_MATCHES(run("other"), std::logic_error, Catch::Message("a kernel's own exception"));
}
