#ifndef CBECKON_H
#define CBECKON_H

/// Asks the CPU to start loading the cache line at `p` into its caches: a hint, with no effect on results and no
/// fault for any address. The engine uses it to fetch the memory of events and users a few events ahead.
static inline void beckon_prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }

#endif
