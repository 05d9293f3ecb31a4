// fp64 and low-precision CPU backward references: filled in by the reference work.
#include "reference/cpu_reference.h"
