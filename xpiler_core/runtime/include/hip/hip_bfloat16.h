#pragma once
#include "../xpiler/half.h"
