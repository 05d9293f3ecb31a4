// Public backward entry points (api): filled in by the API work.
#include "api/backends.h"
