// Statistics that depend on the order of the values.
#include "vecstats.h"

#include <algorithm>

extern "C" {

int vs_min(const double *xs, size_t n, double *out) {
    if (out == nullptr || (xs == nullptr && n > 0)) return VS_NULL;
    if (n == 0) return VS_EMPTY;
    *out = *std::min_element(xs, xs + n);
    return VS_OK;
}

int vs_max(const double *xs, size_t n, double *out) {
    if (out == nullptr || (xs == nullptr && n > 0)) return VS_NULL;
    if (n == 0) return VS_EMPTY;
    *out = *std::max_element(xs, xs + n);
    return VS_OK;
}

}  // extern "C"
