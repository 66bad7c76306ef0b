/* vecstats: summary statistics of arrays of doubles, callable from C (and so from ctypes).
 *
 * Every function takes the array as a pointer and a count, writes its result through `out`, and
 * returns a status code. On any status other than VS_OK, `*out` is left as it was. The input
 * array is never modified.
 */
#ifndef VECSTATS_H
#define VECSTATS_H

#include <stddef.h>

#define VS_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

enum vs_status {
    VS_OK = 0,
    VS_EMPTY = 1,     /* too few values for the statistic */
    VS_DOMAIN = 2,    /* an argument outside its domain (a NaN where an order is needed, q not in [0, 1]) */
    VS_NULL = 3,      /* `xs` is NULL while `n` > 0, or `out` is NULL */
    VS_NO_MEMORY = 4  /* a working copy could not be allocated */
};

/* The library's version, "MAJOR.MINOR.PATCH". */
VS_API const char *vs_version(void);

/* Sum of the values; 0.0 for none. */
VS_API int vs_sum(const double *xs, size_t n, double *out);

/* Arithmetic mean; VS_EMPTY for none. */
VS_API int vs_mean(const double *xs, size_t n, double *out);

/* Smallest and largest value; VS_EMPTY for none. */
VS_API int vs_min(const double *xs, size_t n, double *out);
VS_API int vs_max(const double *xs, size_t n, double *out);

/* Largest minus smallest value; VS_EMPTY for none. */
VS_API int vs_range(const double *xs, size_t n, double *out);

#ifdef __cplusplus
}
#endif

#endif /* VECSTATS_H */
