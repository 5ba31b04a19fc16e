// The primitive transforms, each changing one axis of a tensor's kernel type, declared as
// trait specialisations so that a backend or a user adds one without editing fluidk:
//   layout_transform<P, FromLayout, ToLayout>   re-lays out data on place kind P
//   cast_transform<P, From, To>                 converts the data type on place kind P
//   fused_transform<P, FromLayout, ToLayout, From, To>  both in one pass on P
//   copy_traits<FromPlace, ToPlace>             moves bytes between places (fluidk/device.hpp)
// Each specialisation provides `static void run(const Tensor& src, Tensor& dst)`, where
// dst is already allocated with the target's shape, data type, layout and place.
#pragma once

#include <concepts>

#include "fluidk/device.hpp"
#include "fluidk/tensor.hpp"

namespace fluidk {

template <class P, class FromLayout, class ToLayout>
struct layout_transform {};

template <class P, class From, class To>
struct cast_transform {};

template <class P, class FromLayout, class ToLayout, class From, class To>
struct fused_transform {};

template <class T>
concept TransformStep = requires(const Tensor& src, Tensor& dst) {
  T::run(src, dst);
};

template <class P, class FromLayout, class ToLayout>
concept HasLayoutTransform = TransformStep<layout_transform<P, FromLayout, ToLayout>>;

template <class P, class From, class To>
concept HasCastTransform = TransformStep<cast_transform<P, From, To>>;

template <class P, class FromLayout, class ToLayout, class From, class To>
concept HasFusedTransform = TransformStep<fused_transform<P, FromLayout, ToLayout, From, To>>;

}  // namespace fluidk
