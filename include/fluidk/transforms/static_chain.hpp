// The static path of the transforms: for two kernel types known at compile time, the chain
// is a type computed by the planner during compilation, and applying it is a fixed
// sequence of calls. When no chain exists, one static_assert names the axis that has no
// transform.
#pragma once

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/integral.hpp>
#include <boost/mp11/list.hpp>
#include <cstddef>
#include <utility>

#include "fluidk/kernel_type.hpp"
// The CPU's transforms come with every path that plans chains: a translation unit that
// includes a dispatch or executor header plans with them, whatever else it includes.
#include "fluidk/transforms/cpu.hpp"
#include "fluidk/transforms/planner.hpp"
#include "fluidk/transforms/traits.hpp"
#include "fluidk/typed_tensor.hpp"

namespace fluidk {

// One step of a static chain, with its source and target as tags.
template <detail::planning::step_kind Kind, class FromPlace, class ToPlace, class From, class To,
          class FromLayout, class ToLayout>
struct transform_step {
  static constexpr detail::planning::step_kind kind = Kind;
  using from_type = kernel_type<FromPlace, From, FromLayout>;
  using to_type = kernel_type<ToPlace, To, ToLayout>;

  // dst is allocated by the caller with the target's shape, data type, layout and place.
  static void run(const Tensor& src, Tensor& dst) {
    using detail::planning::step_kind;
    if constexpr (Kind == step_kind::layout)
      layout_transform<FromPlace, FromLayout, ToLayout>::run(src, dst);
    else if constexpr (Kind == step_kind::cast)
      cast_transform<FromPlace, From, To>::run(src, dst);
    else if constexpr (Kind == step_kind::fused)
      fused_transform<FromPlace, FromLayout, ToLayout, From, To>::run(src, dst);
    else
      copy_traits<FromPlace, ToPlace>::copy(dst.memory(), src.memory(), src.storage_bytes());
  }
};

namespace detail::planning {

template <class From, class To>
struct static_planner {
  using from_place = typename From::place_t;
  using to_place = typename To::place_t;
  using place_types = boost::mp11::mp_list<from_place, to_place, cpu>;

  static constexpr problem the_problem =
      make_problem({place::of<from_place>(), place::of<to_place>(), data_type_of<typename From::dtype_t>,
                    data_type_of<typename To::dtype_t>, data_layout_of<typename From::layout_t>,
                    data_layout_of<typename To::layout_t>});

  template <std::size_t P>
  static constexpr std::size_t place_type_index() {
    constexpr place_kind_id id = the_problem.s.places[P].kind_id();
    return id == from_place::id ? 0 : id == to_place::id ? 1 : 2;
  }
  template <std::size_t P>
  using place_at = boost::mp11::mp_at_c<place_types, place_type_index<P>()>;
  template <std::size_t D>
  using dtype_at = type_of<the_problem.s.dtypes[D]>;
  template <std::size_t L>
  using layout_at = typename layout_type_of<the_problem.s.layouts[L].id(), typename From::layout_t,
                                            typename To::layout_t, plain_layout_t<typename From::layout_t>,
                                            plain_layout_t<typename To::layout_t>>::type;

  // Edge tables over the candidate indices, filled from the trait specialisations.
  struct tables {
    bool layout[3][2][3][3]{};
    bool cast[3][3][2][2]{};
    bool fused[3][3][3][2][2]{};
    bool copy[3][3]{};
  };

  static constexpr tables make_tables() {
    using boost::mp11::mp_for_each;
    using boost::mp11::mp_iota_c;
    tables t;
    constexpr const space& s = the_problem.s;
    mp_for_each<mp_iota_c<3>>([&](auto p) {
      if constexpr (p < s.place_count) {
        using P = place_at<p>;
        mp_for_each<mp_iota_c<3>>([&](auto q) {
          if constexpr (q < s.place_count) t.copy[p][q] = CopyBetween<P, place_at<q>>;
        });
        mp_for_each<mp_iota_c<3>>([&](auto a) {
          if constexpr (a < s.layout_count) {
            mp_for_each<mp_iota_c<3>>([&](auto b) {
              if constexpr (b < s.layout_count) {
                mp_for_each<mp_iota_c<2>>([&](auto d) {
                  if constexpr (d < s.dtype_count) {
                    t.layout[p][d][a][b] = HasLayoutTransform<P, layout_at<a>, layout_at<b>>;
                    mp_for_each<mp_iota_c<2>>([&](auto e) {
                      if constexpr (e < s.dtype_count)
                        t.fused[p][a][b][d][e] =
                            HasFusedTransform<P, layout_at<a>, layout_at<b>, dtype_at<d>, dtype_at<e>>;
                    });
                  }
                });
              }
            });
            mp_for_each<mp_iota_c<2>>([&](auto d) {
              if constexpr (d < s.dtype_count)
                mp_for_each<mp_iota_c<2>>([&](auto e) {
                  if constexpr (e < s.dtype_count)
                    t.cast[p][a][d][e] = HasCastTransform<P, dtype_at<d>, dtype_at<e>>;
                });
            });
          }
        });
      }
    });
    return t;
  }
  static constexpr tables edge_tables = make_tables();

  struct edges {
    constexpr bool layout(std::size_t p, std::size_t d, std::size_t a, std::size_t b) const {
      return edge_tables.layout[p][d][a][b];
    }
    constexpr bool cast(std::size_t p, std::size_t l, std::size_t d, std::size_t e) const {
      return edge_tables.cast[p][l][d][e];
    }
    constexpr bool fused(std::size_t p, std::size_t a, std::size_t b, std::size_t d, std::size_t e) const {
      return edge_tables.fused[p][a][b][d][e];
    }
    constexpr bool copy(std::size_t p, std::size_t q) const { return edge_tables.copy[p][q]; }
  };

  static constexpr chain result = find_chain(the_problem, edges{});
  static constexpr axis missing = result.found ? axis::none : missing_axis(the_problem, edges{});

  template <std::size_t I>
  struct step_type {
    static constexpr step st = result.steps[I];
    using type =
        transform_step<st.kind, place_at<st.from.place>, place_at<st.to.place>, dtype_at<st.from.dtype>,
                       dtype_at<st.to.dtype>, layout_at<st.from.layout>, layout_at<st.to.layout>>;
  };
  template <class I>
  using step_at = typename step_type<I::value>::type;
  using steps = boost::mp11::mp_transform<step_at, boost::mp11::mp_iota_c<result.size>>;
};

// Instantiated only when no chain exists, to say which axis is missing in one line.
template <class From, class To, axis Missing>
struct no_transform_chain {
  static_assert(
      Missing != axis::place,
      "fluidk: no transform chain between these kernel types (see the instantiation above): no copy "
      "between their places, directly or through the host");
  static_assert(
      Missing != axis::dtype,
      "fluidk: no transform chain between these kernel types (see the instantiation above): no cast "
      "between their data types on any place of the chain");
  static_assert(
      Missing != axis::layout,
      "fluidk: no transform chain between these kernel types (see the instantiation above): no layout "
      "transform between their layouts on any place of the chain");
  using steps = boost::mp11::mp_list<>;
};

template <class From, class To>
struct checked_chain {
  using planner = static_planner<From, To>;
  using steps = typename std::conditional_t<planner::result.found, planner,
                                            no_transform_chain<From, To, planner::missing>>::steps;
};

}  // namespace detail::planning

// The chain from kernel type From to kernel type To: an Mp11 list of transform_step types,
// empty when nothing needs to change.
template <KernelType From, KernelType To>
using transform_chain = typename detail::planning::checked_chain<From, To>::steps;

// Bytes moved per element by that chain (the planner's cost).
template <KernelType From, KernelType To>
inline constexpr std::size_t transform_chain_cost = detail::planning::static_planner<From, To>::result.cost;

namespace detail {
// Whether a chain copies between places (through the host, for a cast its place cannot do).
template <class Steps>
inline constexpr bool has_copy_step = false;
template <class... S>
inline constexpr bool has_copy_step<boost::mp11::mp_list<S...>> = ((S::kind == planning::step_kind::copy) ||
                                                                   ...);

// The tensor a step writes: the step's target type on its place. A layout change or a cast
// stays on the device its source is on; a copy to the final place goes to the requested
// device, a copy to another place (the host on the way) to device 0 of it.
template <class Step, class FinalPlace>
Tensor allocate_step_output(const Tensor& src, int final_device) {
  using to = typename Step::to_type;
  const int device = Step::kind != planning::step_kind::copy            ? src.place().device()
                     : std::is_same_v<typename to::place_t, FinalPlace> ? final_device
                                                                        : 0;
  return Tensor(src.dims(), data_type_of<typename to::dtype_t>, place::of<typename to::place_t>(device),
                data_layout_of<typename to::layout_t>);
}
}  // namespace detail

// The layout a transform to kernel type To leaves a tensor of layout L in: To's layout,
// or for a target of ANY_LAYOUT, L itself, unblocked to its plain layout if it was blocked.
template <class To, class L>
using transform_result_layout =
    std::conditional_t<!std::is_same_v<typename To::layout_t, layout::any>, typename To::layout_t,
                       std::conditional_t<data_layout_of<L>.blocked(), plain_layout_t<L>, L>>;

// Applies the static chain to a tensor whose kernel type is From; the result has kernel
// type To on device `device`. The source is never written; with nothing to change, the
// result shares the source's buffer.
template <KernelType To, class P, class T, class L>
typed_tensor<typename To::place_t, typename To::dtype_t, transform_result_layout<To, L>> transform(
    const typed_tensor<P, T, L>& src, int device = 0) {
  using to_place = typename To::place_t;
  using result_type = typed_tensor<to_place, typename To::dtype_t, transform_result_layout<To, L>>;
  using steps = transform_chain<kernel_type<P, T, L>, To>;
  constexpr data_layout start = detail::planning::effective_source_layout(
      data_layout_of<L>,
      detail::planning::effective_target_layout(data_layout_of<L>, data_layout_of<typename To::layout_t>));
  if constexpr (boost::mp11::mp_empty<steps>::value && start == data_layout_of<L> &&
                !to_place::has_device_id) {
    return result_type::unchecked(src.tensor());  // nothing to do, and nothing to check at run time
  } else {
    Tensor current = src.tensor();
    if constexpr (start != data_layout_of<L>) {  // ANY_LAYOUT read as NCHW or NC
      detail::check_read_as(current.dims(), data_layout_of<L>, start);
      current.set_layout(start);
    }
    // The chain works on place kinds; a tensor on another device of the target kind moves
    // there, before the chain when it widens the elements on that place and after it
    // otherwise, so that the fewer bytes cross (as the runtime planner, which sees devices,
    // orders a cast and a copy). A chain that goes through the host moves it on the way: its
    // copy back writes the target device.
    auto to_device = [&] {
      if constexpr (to_place::has_device_id) {
        if (current.place().device() != device) {
          Tensor moved(current.dims(), current.dtype(), place::of<to_place>(device), current.layout());
          copy_traits<to_place, to_place>::copy(moved.memory(), current.memory(), current.storage_bytes());
          current = std::move(moved);
        }
      }
    };
    if constexpr (std::is_same_v<P, to_place> && sizeof(T) < sizeof(typename To::dtype_t) &&
                  !detail::has_copy_step<steps>)
      to_device();
    boost::mp11::mp_for_each<steps>([&](auto step) {
      using Step = decltype(step);
      Tensor next = detail::allocate_step_output<Step, to_place>(current, device);
      Step::run(current, next);
      current = std::move(next);
    });
    to_device();
    return result_type::unchecked(std::move(current));
  }
}

}  // namespace fluidk
