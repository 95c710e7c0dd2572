// What host code copies back from the device (XPILER_COPYBACK=FILE). A program that prints nothing to compare is
// judged by the data it copies back to the host: each device-to-host copy appends "copyback N T\n" and its N
// bytes (past COPYBACK_LIMIT in all, "copyback N T -\n": its length alone), T the element type of the
// destination pointer as the host code declared it ('f' float, 'd' double, 'i' an integer, 'b' anything else:
// compared as bytes). Standalone: the runtime's host API includes it, and the verifier's build of a CPU
// translation puts it in front of the translation (verify/program.py), whose prelude calls it through its
// XP_COPY_BACK hook. An include guard, not #pragma once: the text may stand in a file and be included too.
#ifndef XPILER_COPYBACK_H
#define XPILER_COPYBACK_H
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace xpiler {
constexpr size_t COPYBACK_LIMIT = size_t(256) << 20;
template <class T> constexpr char copy_type() {
  using U = typename std::remove_cv<typename std::remove_all_extents<T>::type>::type;
  return std::is_same<U, float>::value ? 'f' : std::is_same<U, double>::value ? 'd'
       : std::is_integral<U>::value ? 'i' : 'b';
}
inline void record_copy_back(const void* d, size_t n, char type = 'b') {
  static FILE* f = [] {
    const char* p = getenv("XPILER_COPYBACK");
    return p && *p ? fopen(p, "wb") : nullptr;
  }();
  static size_t written = 0;
  if (!f) return;
  if (written + n > COPYBACK_LIMIT) {
    fprintf(f, "copyback %zu %c -\n", n, type);
  } else {
    fprintf(f, "copyback %zu %c\n", n, type);
    fwrite(d, 1, n, f);
    written += n;
  }
  fflush(f);
}
}  // namespace xpiler
#endif
