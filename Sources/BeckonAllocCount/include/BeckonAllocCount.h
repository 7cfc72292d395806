#ifndef BECKON_ALLOC_COUNT_H
#define BECKON_ALLOC_COUNT_H

/// The counting allocator's count of the calling thread's calls (declared for users that link it directly; `beckon bench` reads it through
/// BeckonMemory's beckon_alloc_count).
unsigned long long beckon_alloc_count(void);
int beckon_alloc_counting(void);

#endif
