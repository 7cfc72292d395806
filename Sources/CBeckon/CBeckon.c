// CBeckon is header-only (static inline functions Swift inlines); this file gives the target a source.
#include "CBeckon.h"
