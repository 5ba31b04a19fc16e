// The places compiled into this build, as a compile-time list that runtime tables and
// tests iterate over. Each backend is included only when its feature macro is set.
#pragma once

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>

#include "fluidk/place.hpp"

#if defined(FLUIDK_HAS_CUDA) && FLUIDK_HAS_CUDA
#include "fluidk/devices/cuda.hpp"
#define FLUIDK_DETAIL_CUDA_PLACE , ::fluidk::cuda
#else
#define FLUIDK_DETAIL_CUDA_PLACE
#endif

#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
#include "fluidk/devices/opencl.hpp"
#define FLUIDK_DETAIL_OPENCL_PLACE , ::fluidk::opencl
#else
#define FLUIDK_DETAIL_OPENCL_PLACE
#endif

namespace fluidk {

using enabled_places = boost::mp11::mp_list<cpu FLUIDK_DETAIL_CUDA_PLACE FLUIDK_DETAIL_OPENCL_PLACE>;

namespace detail {
template <class P>
using place_id_of = boost::mp11::mp_size_t<P::id>;
}
static_assert(boost::mp11::mp_is_set<boost::mp11::mp_transform<detail::place_id_of, enabled_places>>::value,
              "fluidk: two enabled place kinds declare the same id");

}  // namespace fluidk

#undef FLUIDK_DETAIL_CUDA_PLACE
#undef FLUIDK_DETAIL_OPENCL_PLACE
