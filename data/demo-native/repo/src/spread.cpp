// How far apart the values are.
#include "vecstats.h"

#include <algorithm>

extern "C" {

int vs_range(const double *xs, size_t n, double *out) {
    if (out == nullptr || (xs == nullptr && n > 0)) return VS_NULL;
    if (n == 0) return VS_EMPTY;
    const auto [lo, hi] = std::minmax_element(xs, xs + n);
    *out = *hi - *lo;
    return VS_OK;
}

}  // extern "C"
