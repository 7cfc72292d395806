// The counting allocator for `beckon-bench` ("allocations per event"), linked into that executable only.
//
// On glibc, an executable that defines malloc, calloc and realloc takes them over for every library in the process
// (glibc documents this as replacing malloc). These forward to glibc's own allocator through its exported
// __libc_* entry points, so memory from here is freed by the ordinary free, and memalign and friends stay glibc's.
// The only cost is one relaxed atomic increment per call. Its beckon_alloc_count and beckon_alloc_counting override
// the weak ones of BeckonMemory.
#include "BeckonAllocCount.h"
#include <stddef.h>
// (<stddef.h> is the compiler's and does not say which C library this is: glibc's __GLIBC__ comes from <features.h>.
// Without it the replacement below compiled to nothing and beckon-bench reported "not counted" for a day.)
#if defined(__linux__) && __has_include(<features.h>)
#include <features.h>
#endif

// Under a sanitizer (which must own malloc itself), or built with -DBECKON_NO_ALLOC_COUNT, nothing is replaced and
// the weak definitions (no counts) stay.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define BECKON_NO_ALLOC_COUNT 1
#endif
#endif

#if defined(__linux__) && !defined(__GLIBC__) && !defined(BECKON_NO_ALLOC_COUNT)
#error "beckon-bench counts allocations by replacing glibc's malloc: this Linux C library is not glibc"
#endif

#if defined(__linux__) && defined(__GLIBC__) && !defined(BECKON_NO_ALLOC_COUNT)
#include <stdatomic.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);

static _Atomic unsigned long long count;

void *malloc(size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_calloc(n, size);
}

void *realloc(void *ptr, size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    return __libc_realloc(ptr, size);
}

unsigned long long beckon_alloc_count(void) { return atomic_load_explicit(&count, memory_order_relaxed); }
int beckon_alloc_counting(void) { return 1; }
#endif
