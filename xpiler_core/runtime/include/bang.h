// Shim: BANG sources include <bang.h>; the CPU model provides everything in xpiler_bang.h.
#pragma once
#include "xpiler_bang.h"
