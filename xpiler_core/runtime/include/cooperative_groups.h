#pragma once
#include "xpiler/coop.h"
