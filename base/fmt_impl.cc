// {fmt}'s out-of-line functions, compiled into podshim-hook itself so the hook
// does not load libfmt.so, which in turn loads libstdc++.so (the dynamic
// loader's work on a hook that runs for every container start).
// format-inl.h is the implementation header libfmt-dev installs for this
// purpose; the two explicit instantiations are the locale helpers the
// formatting templates call and the shared library would otherwise supply.
// Linked into podshim-hook always, and into podshimd, podshimctl and the
// CDI benchmark with -Dstatic_cxx (the top-level meson.build says why).
#include <fmt/format-inl.h>

namespace fmt {
inline namespace v9 {
namespace detail {
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl<char>(locale_ref) -> char;
}  // namespace detail
}  // namespace v9
}  // namespace fmt
