// The runtime path of the transforms: for kernel keys known only at run time, the same
// planner runs over the registered tables, once per (from, to) pair; the plan is memoised
// and shared between threads.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "fluidk/detail/runtime_linkage.hpp"
#include "fluidk/kernel_type.hpp"
#include "fluidk/lod_tensor.hpp"
#include "fluidk/selected_rows.hpp"
#include "fluidk/transforms/planner.hpp"
#include "fluidk/transforms/registry.hpp"

namespace fluidk {

// One step of a runtime plan: what it produces and the function that does it (for a copy,
// the registered copy between the two places).
struct transform_plan_step {
  detail::planning::step_kind kind;
  kernel_key from;
  kernel_key to;
  transform_function run = nullptr;
};

class transform_plan {
 public:
  transform_plan() = default;
  transform_plan(data_layout relabel, std::vector<transform_plan_step> steps, std::size_t cost)
      : relabel_(relabel), steps_(std::move(steps)), cost_(cost) {}

  bool empty() const noexcept { return steps_.empty(); }
  const std::vector<transform_plan_step>& steps() const noexcept { return steps_; }
  // Bytes moved per element, summed over the steps.
  std::size_t cost_per_element() const noexcept { return cost_; }

  // Runs the plan on `src`; never writes to it. An empty plan returns a tensor sharing
  // src's buffer (relabelled from ANY_LAYOUT when the target names a layout).
  Tensor apply(const Tensor& src) const;

  // Throws what apply would throw for `src` before any step runs, and allocates nothing:
  // data of ANY_LAYOUT whose rank does not fit the layout it is read as, a tensor that holds
  // no data, a result too large to count. (What explain and apply check.)
  void check(const Tensor& src) const;

  // The bytes a run of this plan moves (reads plus writes) for a tensor of `numel` elements.
  std::size_t bytes_moved(std::int64_t numel) const noexcept { return cost_ * std::size_t(numel); }
  // The bytes its copies between places write for a tensor of this shape: the storage each
  // copy writes, a blocked layout's padding included (as apply copies it).
  std::size_t bytes_copied(const dims& shape) const {
    std::size_t bytes = 0;
    for (const transform_plan_step& step : steps_)
      if (step.kind == detail::planning::step_kind::copy)
        bytes += storage_bytes_of(shape, step.to.dtype(), step.to.layout(), step.to.place());
    return bytes;
  }

  // "layout nChw8c->NCHW on Place(cpu), copy Place(cpu)->Place(opencl:0)"; "none" when empty.
  std::string describe() const;

 private:
  data_layout relabel_ = data_layout::any;
  std::vector<transform_plan_step> steps_;
  std::size_t cost_ = 0;
};
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE void transform_plan::check(const Tensor& src) const {
  if (!src.initialized() && !steps_.empty())
    throw error("transform of a tensor that holds no data (" + describe() + ")");
  detail::check_read_as(src.dims(), src.layout(), relabel_);
  for (const transform_plan_step& step : steps_)
    (void)storage_bytes_of(src.dims(), step.to.dtype(), step.to.layout(), step.to.place());
}

FLUIDK_DETAIL_RUNTIME_LINKAGE Tensor transform_plan::apply(const Tensor& src) const {
  check(src);
  Tensor current = src;
  if (relabel_ != current.layout()) current.set_layout(relabel_);
  for (const transform_plan_step& step : steps_) {
    Tensor next(current.dims(), step.to.dtype(), step.to.place(), step.to.layout());
    if (step.kind == detail::planning::step_kind::copy)
      copy_bytes(next.memory(), current.memory(), current.storage_bytes());
    else
      step.run(current, next);
    current = std::move(next);
  }
  return current;
}

FLUIDK_DETAIL_RUNTIME_LINKAGE std::string transform_plan::describe() const {
  if (steps_.empty()) return "none";
  std::string out;
  for (const transform_plan_step& step : steps_) {
    if (!out.empty()) out += ", ";
    out += std::string(detail::planning::name_of(step.kind)) + " ";
    switch (step.kind) {
      case detail::planning::step_kind::copy:
        out += step.from.place().to_string() + "->" + step.to.place().to_string();
        break;
      case detail::planning::step_kind::cast:
        out += std::string(name_of(step.from.dtype())) + "->" + std::string(name_of(step.to.dtype())) +
               " on " + step.to.place().to_string();
        break;
      case detail::planning::step_kind::layout:
        out += std::string(name_of(step.from.layout())) + "->" + std::string(name_of(step.to.layout())) +
               " on " + step.to.place().to_string();
        break;
      case detail::planning::step_kind::fused:
        out += std::string(name_of(step.from.layout())) + "/" + std::string(name_of(step.from.dtype())) +
               "->" + std::string(name_of(step.to.layout())) + "/" + std::string(name_of(step.to.dtype())) +
               " on " + step.to.place().to_string();
        break;
    }
  }
  return out;
}
#endif

#if FLUIDK_DETAIL_RUNTIME_HERE
}  // namespace fluidk
// The CPU's transforms come with every path that plans chains: a translation unit that plans
// (this one, where the runtime is compiled) registers them on its first plan, whatever else the
// program includes. A file that only calls the separate runtime does not compile them.
#include "fluidk/transforms/cpu.hpp"
namespace fluidk {
namespace detail {

// Edges from the runtime tables, in the planner's candidate indices.
struct runtime_edges {
  const planning::space& s;
  const transform_registry& registry = transform_registry::instance();
  const device_registry& devices = device_registry::instance();

  bool layout(std::size_t p, std::size_t d, std::size_t a, std::size_t b) const {
    return registry.find(planning::step_kind::layout, s.places[p].kind_id(), s.layouts[a], s.layouts[b],
                         s.dtypes[d], s.dtypes[d]) != nullptr;
  }
  bool cast(std::size_t p, std::size_t l, std::size_t d, std::size_t e) const {
    return registry.find(planning::step_kind::cast, s.places[p].kind_id(), s.layouts[l], s.layouts[l],
                         s.dtypes[d], s.dtypes[e]) != nullptr;
  }
  bool fused(std::size_t p, std::size_t a, std::size_t b, std::size_t d, std::size_t e) const {
    return registry.find(planning::step_kind::fused, s.places[p].kind_id(), s.layouts[a], s.layouts[b],
                         s.dtypes[d], s.dtypes[e]) != nullptr;
  }
  bool copy(std::size_t p, std::size_t q) const {
    return devices.find_copy(s.places[p].kind_id(), s.places[q].kind_id()) != nullptr;
  }
};

inline planning::request make_request(const kernel_key& from, const kernel_key& to) {
  return {from.place(), to.place(), from.dtype(), to.dtype(), from.layout(), to.layout()};
}

inline transform_plan make_plan(const kernel_key& from, const kernel_key& to) {
  const planning::problem problem = planning::make_problem(make_request(from, to));
  const runtime_edges edges{problem.s};
  const planning::chain chain = planning::find_chain(problem, edges);
  if (!chain.found) {
    const planning::axis missing = planning::missing_axis(problem, edges);
    const char* what =
        missing == planning::axis::place   ? "no copy between the places, directly or through the host"
        : missing == planning::axis::dtype ? "no cast between the data types on any place of the chain"
                                           : "no layout transform between the layouts on any place "
                                             "of the chain";
    throw not_registered("no transform chain from " + from.to_string() + " to " + to.to_string() + ": " +
                         what);
  }
  const planning::space& s = problem.s;
  std::vector<transform_plan_step> steps;
  steps.reserve(chain.size);
  auto key_of = [&](const planning::state& st) {
    return kernel_key(s.places[st.place], s.dtypes[st.dtype], s.layouts[st.layout], to.library());
  };
  for (std::size_t i = 0; i < chain.size; ++i) {
    const planning::step& st = chain.steps[i];
    const kernel_key a = key_of(st.from), b = key_of(st.to);
    transform_function fn =
        st.kind == planning::step_kind::copy
            ? nullptr
            : transform_registry::instance().find(st.kind, a.place().kind_id(), a.layout(), b.layout(),
                                                  a.dtype(), b.dtype());
    steps.push_back({st.kind, a, b, fn});
  }
  return transform_plan(s.layouts[problem.from.layout], std::move(steps), chain.cost);
}

class plan_cache {
 public:
  static plan_cache& instance() {
    static plan_cache cache;
    return cache;
  }

  // Plans are kept per registration generation: one made before a copy or a transform was
  // registered is not served after it (the old one stays, so references to it stay valid).
  const transform_plan& get(const kernel_key& from, const kernel_key& to) {
    cpu_transforms_ready();  // before the generation is read: the CPU's entries are always there
    const key k{from.ordinal(), to.ordinal(), from.place().device(), to.place().device(),
                registration_generation().load(std::memory_order_acquire)};
    {
      const std::shared_lock lock(mutex_);
      if (const auto it = plans_.find(k); it != plans_.end()) return it->second;
    }
    transform_plan plan = make_plan(from, to);  // outside the lock: planning may throw
    const std::unique_lock lock(mutex_);
    return plans_.try_emplace(k, std::move(plan)).first->second;
  }

  std::size_t size() const {
    const std::shared_lock lock(mutex_);
    return plans_.size();
  }

 private:
  using key = std::tuple<std::size_t, std::size_t, int, int, std::uint64_t>;
  struct key_hash {
    std::size_t operator()(const key& k) const noexcept {
      const auto [a, b, c, d, generation] = k;
      return (((a * kernel_key::ordinal_count + b) * 131 + std::size_t(c)) * 131 + std::size_t(d)) * 31 +
             std::size_t(generation);
    }
  };
  mutable std::shared_mutex mutex_;
  std::unordered_map<key, transform_plan, key_hash> plans_;  // nodes: references stay valid
};

}  // namespace detail
#endif

// The kernel key of a tensor's data: its place, data type and layout (library plain).
inline kernel_key key_of(const Tensor& t) { return {t.place(), t.dtype(), t.layout(), library_type::plain}; }

// The memoised plan from one kernel key to another (libraries are ignored: they describe
// kernels, not data). Throws not_registered naming both keys and the missing axis.
FLUIDK_DETAIL_RUNTIME_LINKAGE const transform_plan& plan_transform(const kernel_key& from,
                                                                   const kernel_key& to);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE const transform_plan& plan_transform(const kernel_key& from,
                                                                   const kernel_key& to) {
  return detail::plan_cache::instance().get(from, to);
}
#endif

// The tensor as a kernel of key `to` needs it; never writes to `src`.
FLUIDK_DETAIL_RUNTIME_LINKAGE Tensor transform(const Tensor& src, const kernel_key& to);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE Tensor transform(const Tensor& src, const kernel_key& to) {
  return plan_transform(key_of(src), to).apply(src);
}
#endif
FLUIDK_DETAIL_RUNTIME_LINKAGE LoDTensor transform(const LoDTensor& src, const kernel_key& to);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE LoDTensor transform(const LoDTensor& src, const kernel_key& to) {
  return LoDTensor(transform(src.tensor(), to), src.lod());
}
#endif
FLUIDK_DETAIL_RUNTIME_LINKAGE SelectedRows transform(const SelectedRows& src, const kernel_key& to);
#if FLUIDK_DETAIL_RUNTIME_HERE
FLUIDK_DETAIL_RUNTIME_LINKAGE SelectedRows transform(const SelectedRows& src, const kernel_key& to) {
  return SelectedRows(src.rows(), src.height(), transform(src.value(), to));
}
#endif

}  // namespace fluidk
