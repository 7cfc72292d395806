// The system's zstd (Debian: libzstd-dev, which scripts/install-headers.sh installs): the fleet log's bodies.
#include <zstd.h>
