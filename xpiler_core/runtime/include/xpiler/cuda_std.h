// libcu++'s cuda::std on the CPU: the C++ standard library itself (host and device code are one program here).
#pragma once

namespace cuda {
namespace std {
using namespace ::std;
}  // namespace std
}  // namespace cuda
