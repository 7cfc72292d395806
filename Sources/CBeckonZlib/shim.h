// The system's zlib, for BeckonClient's gzip request bodies: the iOS and macOS SDKs ship it, and so does every Linux
// distribution (Debian: zlib1g-dev).
#include <zlib.h>
