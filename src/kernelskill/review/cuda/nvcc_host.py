"""What nvcc's implicit headers give the host code of a `.cu` and a host compiler alone does not: the launch entry
point nvcc's launch expressions call, the global min and max overloads, and the runtime's C++ forms that
cuda_runtime.h declares only under `__CUDACC__`. The host part of a split CUDA source (split.py) is compiled against
these, ahead of the torch headers its variant needs (plan.SPLIT_HOST_HEADERS)."""

from __future__ import annotations

PUSH_CONFIGURATION = ("extern \"C\" unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim = 1, "
                      "size_t sharedMem = 0, CUstream_st *stream = 0);")
"""nvcc's declaration of the runtime entry that a launch expression calls (as cudafe++ writes it into host code)."""


def _min_max() -> str:
    """The global min and max that nvcc's implicit CUDA headers give host code too (a host launcher's
    `min(65535, blocks)`), which a host compiler alone does not declare: the same overloads, with the same results
    (signed and unsigned mixed compare as unsigned; long as long long, LP64; float and double as fmin/fmax)."""
    lines = ["#include <math.h>", "// nvcc's host min and max (kernelskill cuda_build, split)"]
    for op, cmp, f in (("min", "<", "fmin"), ("max", ">", "fmax")):
        lines += [f"inline int {op}(const int a, const int b) {{ return a {cmp} b ? a : b; }}"]
        for prefix, t in (("u", "unsigned int"), ("ll", "long long int"), ("ull", "unsigned long long int")):
            lines.append(f"inline {t} {prefix}{op}(const {t} a, const {t} b) {{ return a {cmp} b ? a : b; }}")
        for result, helper, pairs in (
                ("unsigned int", f"u{op}", [("unsigned int", "unsigned int"), ("int", "unsigned int"),
                                            ("unsigned int", "int")]),
                ("long int", f"ll{op}", [("long int", "long int")]),
                ("unsigned long int", f"ull{op}", [("unsigned long int", "unsigned long int"),
                                                   ("long int", "unsigned long int"),
                                                   ("unsigned long int", "long int")]),
                ("long long int", f"ll{op}", [("long long int", "long long int")]),
                ("unsigned long long int", f"ull{op}", [("unsigned long long int", "unsigned long long int"),
                                                        ("long long int", "unsigned long long int"),
                                                        ("unsigned long long int", "long long int")]),
                ("float", f"{f}f", [("float", "float")]),
                ("double", f, [("double", "double"), ("float", "double"), ("double", "float")])):
            arg = {"u": "unsigned int", "ll": "long long int", "ul": "unsigned long long int"}.get(helper[:2], result)
            for a, b in pairs:
                lines.append(f"static inline {result} {op}(const {a} a, const {b} b) "
                             f"{{ return static_cast<{result}>({helper}(static_cast<{arg}>(a), static_cast<{arg}>(b))); }}")
    return "\n".join(lines)


NVCC_HOST_HELPERS = _min_max()


# cuda_runtime.h declares some of the runtime's C++ forms (a symbol by reference, a kernel by its own pointer type)
# only for code nvcc compiles (`__CUDACC__`); the host part, compiled by the host compiler alone, gets those here: each
# calls the C form with the address nvcc's host code would pass (the variable's host shadow, the kernel's stub). The
# others (cudaLaunchKernel, most occupancy calls) it declares for every compiler.
NVCC_HOST_TEMPLATES = "\n".join([
    "// the runtime's C++ forms that nvcc's host code has (kernelskill cuda_build, split)",
    "template <class T> inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count, "
    "size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyHostToDevice) "
    "{ return ::cudaMemcpyToSymbol((const void*)&symbol, src, count, offset, kind); }",
    "template <class T> inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count, "
    "size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t stream = 0) "
    "{ return ::cudaMemcpyToSymbolAsync((const void*)&symbol, src, count, offset, kind, stream); }",
    "template <class T> inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count, "
    "size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyDeviceToHost) "
    "{ return ::cudaMemcpyFromSymbol(dst, (const void*)&symbol, count, offset, kind); }",
    "template <class T> inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count, "
    "size_t offset = 0, cudaMemcpyKind kind = cudaMemcpyDeviceToHost, cudaStream_t stream = 0) "
    "{ return ::cudaMemcpyFromSymbolAsync(dst, (const void*)&symbol, count, offset, kind, stream); }",
    "template <class T> inline cudaError_t cudaGetSymbolAddress(void** address, const T& symbol) "
    "{ return ::cudaGetSymbolAddress(address, (const void*)&symbol); }",
    "template <class T> inline cudaError_t cudaGetSymbolSize(size_t* size, const T& symbol) "
    "{ return ::cudaGetSymbolSize(size, (const void*)&symbol); }",
    "template <class T> inline cudaError_t cudaFuncSetCacheConfig(T* kernel, cudaFuncCache config) "
    "{ return ::cudaFuncSetCacheConfig((const void*)kernel, config); }",
    "template <class T> inline cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attribute, int value) "
    "{ return ::cudaFuncSetAttribute((const void*)kernel, attribute, value); }",
    "template <class T> inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, T* kernel) "
    "{ return ::cudaFuncGetAttributes(attributes, (const void*)kernel); }",
])
