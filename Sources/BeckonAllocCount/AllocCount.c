// The counting allocator for `beckon-bench` ("allocations per event"), linked into that executable only.
//
// On glibc, an executable that defines malloc, calloc and realloc takes them over for every library in the process
// (glibc documents this as replacing malloc). These forward to glibc's own allocator through its exported
// __libc_* entry points, so memory from here is freed by the ordinary free, and memalign and friends stay glibc's.
// The only cost is one increment per call, of a count each thread keeps for itself: an atomic count shared by all
// threads was a locked add on one cache line that the engine's thread and the decoding thread of `bench`'s every-core
// run both wrote, about 2% of that run's samples (`perf`), against 0.7% on one thread. beckon_alloc_count is the
// calling thread's count (the in-process run counts on one thread). Its beckon_alloc_count and beckon_alloc_counting
// override the weak ones of BeckonMemory.
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
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);

// (initial-exec: the executable's own thread-local, read at a fixed offset from the thread pointer, with no call to
// __tls_get_addr, which could itself allocate.)
static __thread unsigned long long count __attribute__((tls_model("initial-exec")));

void *malloc(size_t size) {
    count += 1;
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size) {
    count += 1;
    return __libc_calloc(n, size);
}

void *realloc(void *ptr, size_t size) {
    count += 1;
    return __libc_realloc(ptr, size);
}

unsigned long long beckon_alloc_count(void) { return count; }
int beckon_alloc_counting(void) { return 1; }
#endif
