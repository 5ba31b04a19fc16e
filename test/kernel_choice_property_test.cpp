// A property of kernel choice: the static path, the runtime call and the executor pick the
// same kernel, or agree that there is none, for every operator declaration and request
// (the declarations and their static picks: kernel_choice_property_decls.cpp); and what they
// agree on keeps a library request a preference (check_library_preference).
#include "kernel_choice_property.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <fluidk/devices/onednn_tags.hpp>
#include <fluidk/executor.hpp>
#include <fluidk/transforms/cpu.hpp>
#include <span>
#include <string>
#include <vector>

#include "simulated_device.hpp"

using namespace fluidk;
using namespace fluidk_test::property;
using npu = fluidk_test::accelerator;

namespace {

std::string describe(std::size_t outcome) {
  if (outcome < key_count) return "kernel " + std::to_string(outcome);
  switch (selection_status(outcome - key_count)) {
    case selection_status::no_kernel:
      return "no kernel";
    case selection_status::inputs_disagree:
      return "inputs disagree";
    case selection_status::no_data_type:
      return "no data type";
    default:
      return "?";
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
  constexpr data_layout layouts[] = {data_layout::any, data_layout::nchw, data_layout_of<layout::nChw8c>};
  const place places_[] = {cpu_place, place::of<npu>(0)};
  const std::optional<fallback_policy> policies[] = {std::nullopt, fallback_policy::strict,
                                                     fallback_policy::cpu};
  return {places_[x / 6],
          places_[(r / 36) % 2],
          (x / 3) % 2 ? data_type::float64 : data_type::float32,
          layouts[x % 3],
          int((r / 12) % 3),
          (r / 72) % 2 ? library_type_of<library::onednn> : library_type::plain,
          policies[r / 144]};
}

Tensor make(data_type dtype, data_layout layout, const place& where) {
  Tensor t({1, 8, 1, 1}, dtype, cpu_place, layout);
  std::memset(t.memory().handle, 0, t.storage_bytes());
  return where == cpu_place ? t : copy_to(t, where);
}

std::size_t checked = 0, checked_preferences = 0;

// Compares the runtime picks of one declaration with its static ones (not a template: the
// same code serves every declaration).
void check_declaration(const operator_info& info, std::span<const std::size_t> statics) {
  auto& registry = operator_registry::instance();
  Scope scope;
  Executor on_cpu(cpu_place), on_npu(place::of<npu>(0));
  for (std::size_t r = 0; r < request_count; ++r) {
    const runtime_request q = runtime_request_of(r);
    scope.var("x").set(LoDTensor(make(q.x_dtype, q.x_layout, q.x_place)));
    if (q.label != 0)
      scope.var("label").set(
          LoDTensor(make(q.label == 1 ? data_type::float32 : data_type::int64, data_layout::any, cpu_place)));
    registry.set_global_fallback(q.policy);
    attribute_map attrs;
    if (q.lib == library_type_of<library::onednn>) attrs.set("use_onednn", true);

    std::vector<std::vector<Variable*>> in{{&scope.get("x")}, {}};
    if (q.label != 0) in[1].push_back(&scope.get("label"));
    const std::vector<std::vector<Variable*>> out{{&scope.var("out")}};
    const std::size_t by_call = runtime_outcome([&] { run_operator(info, q.where, in, out, attrs); });

    op_invocation call{std::string(info.name()), {{"X", {"x"}}}, {{"Out", {"out"}}}, attrs};
    if (q.label != 0) call.inputs.push_back({"Label", {"label"}});
    Executor& executor = q.where == cpu_place ? on_cpu : on_npu;
    const std::size_t by_executor = runtime_outcome([&] { executor.run(std::span(&call, 1), scope); });
    registry.set_global_fallback(std::nullopt);

    if (by_call != statics[r] || by_executor != statics[r]) {
      INFO(info.name() << " request " << r << ": static " << describe(statics[r]) << ", runtime "
                       << describe(by_call) << ", executor " << describe(by_executor));
      CHECK(false);
    }
    if (q.label != 0) scope.erase("label");
    ++checked;
  }
}

// The library preference, against the outcomes the paths agree on: under every policy but
// strict, a oneDNN request runs a oneDNN kernel or exactly what the same request without it
// runs (the plain kernel of the same place, as Fluid falls back, or what the policy allows
// after it), so it is never refused where the plain request is served; under strict, it runs
// a oneDNN kernel or none.
void check_library_preference(const operator_info& info, std::span<const std::size_t> statics) {
  const auto onednn_kernel = [](std::size_t outcome) {
    return outcome < key_count && (outcome / 6) % 2 == 1;
  };
  for (std::size_t r = 0; r < request_count; ++r) {
    const runtime_request q = runtime_request_of(r);
    if (q.lib != library_type_of<library::onednn>) continue;
    const std::size_t asked = statics[r], plain = statics[r - 72];  // the same request, library plain
    const bool holds = q.policy.value_or(info.fallback()) == fallback_policy::strict
                           ? asked >= key_count || onednn_kernel(asked)
                           : onednn_kernel(asked) || asked == plain;
    if (!holds) {
      INFO(info.name() << " request " << r << ": with use_onednn " << describe(asked) << ", without "
                       << describe(plain));
      CHECK(false);
    }
    ++checked_preferences;
  }
}

}  // namespace

TEST_CASE("the static path, the runtime call and the executor choose the same kernel",
          "[kernel_choice][property]") {
  operator_registry::instance().set_fallback_reporter([](const fallback_event&) {});
  const std::vector<declared> all = declarations();
  REQUIRE(all.size() == declaration_count);
  for (const declared& d : all) {
    check_declaration(*d.info, d.statics);
    check_library_preference(*d.info, d.statics);
  }
  operator_registry::instance().set_fallback_reporter(nullptr);
  CHECK(checked == declaration_count * request_count);
  CHECK(checked_preferences == declaration_count * request_count / 2);
  WARN(declaration_count << " declarations x " << request_count << " requests = " << checked
                         << " choices compared");
}
