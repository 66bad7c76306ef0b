// Sums and means.
#include "vecstats.h"

#include <cmath>

namespace {

const char kVersion[] = "0.1.0";

// A long sum of doubles drifts as low-order bits fall off. Neumaier's variant of Kahan's
// compensation keeps them in `carry`, whichever of the running total and the next term is larger.
double compensated_sum(const double *xs, size_t n) {
    double total = 0.0;
    double carry = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double t = total + xs[i];
        if (std::fabs(total) >= std::fabs(xs[i])) {
            carry += (total - t) + xs[i];
        } else {
            carry += (xs[i] - t) + total;
        }
        total = t;
    }
    return total + carry;
}

}  // namespace

extern "C" {

const char *vs_version(void) { return kVersion; }

int vs_sum(const double *xs, size_t n, double *out) {
    if (out == nullptr || (xs == nullptr && n > 0)) return VS_NULL;
    *out = compensated_sum(xs, n);
    return VS_OK;
}

int vs_mean(const double *xs, size_t n, double *out) {
    if (out == nullptr || (xs == nullptr && n > 0)) return VS_NULL;
    if (n == 0) return VS_EMPTY;
    *out = compensated_sum(xs, n) / static_cast<double>(n);
    return VS_OK;
}

}  // extern "C"
