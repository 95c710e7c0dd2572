// Shim: BANG sources include <cnrt.h>; the CPU model provides everything in xpiler_bang.h.
#pragma once
#include "xpiler_bang.h"
