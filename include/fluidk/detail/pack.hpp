// A fixed set of values by index: an aggregate with one base per element. Far cheaper to
// compile than std::tuple or hana::basic_tuple, whose constructors are overload sets with
// a constructibility check per element; fluidk builds one per operator declaration and per
// static call site.
#pragma once

#include <cstddef>
#include <utility>

namespace fluidk::detail {

template <std::size_t I, class T>
struct pack_leaf {
  T value;
};

template <class Indices, class... T>
struct pack_impl;
template <std::size_t... I, class... T>
struct pack_impl<std::index_sequence<I...>, T...> : pack_leaf<I, T>... {
  static constexpr std::size_t size = sizeof...(T);
};

// pack<A, B>{{a}, {b}}: aggregate initialisation, element by element.
template <class... T>
using pack = pack_impl<std::index_sequence_for<T...>, T...>;

template <std::size_t I, class T>
[[gnu::always_inline]] constexpr const T& pack_get(const pack_leaf<I, T>& leaf) noexcept {
  return leaf.value;
}

}  // namespace fluidk::detail
