// Where the engine's large host-side functions (launch, block scheduler, device heap, copy-back records, fault
// reports) are compiled. They are the same for every program built with one set of runtime flags, and
// generating their code was most of the g++ time of a small program, so runtime/engine_lib.py compiles them
// once per flag set into a shared library (XPILER_ENGINE_LIBRARY: external definitions) and a program linked
// against it sees their declarations only (XPILER_ENGINE_EXTERN: each definition sits in an #ifndef of it).
// Without either macro they are ordinary inline functions: header-only, as any other includer gets them.
#pragma once
#if defined(XPILER_ENGINE_LIBRARY) || defined(XPILER_ENGINE_EXTERN)
#define XPILER_ENGINE_FN
#else
#define XPILER_ENGINE_FN inline
#endif
