// Naive GPU backward reference: filled in by the reference work.
#include "api/backends.h"
