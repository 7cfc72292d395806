#ifndef CBECKON_H
#define CBECKON_H

/// Asks the CPU to start loading the cache line at `p` into its caches: a hint, with no effect on results and no
/// fault for any address. The engine uses it to fetch the memory of events and users a few events ahead.
static inline void beckon_prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }

/// `beckon_prefetch` for every cache line of the `bytes` bytes at `p`, up to `max_lines` lines.
static inline void beckon_prefetch_range(const void *p, long bytes, long max_lines) {
    unsigned long line = (unsigned long)p & ~63UL;
    unsigned long end = (unsigned long)p + (unsigned long)(bytes > 0 ? bytes : 1);
    for (long n = 0; line < end && n < max_lines; line += 64, n++) __builtin_prefetch((const void *)line, 0, 3);
}

#endif
