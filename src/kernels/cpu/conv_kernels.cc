// Conv2D and its backprops; registered from RegisterNnKernels.
#include "kernels/kernel_registry.h"
