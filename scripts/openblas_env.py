"""The PyTorch peers' OpenBLAS at its strongest (shared by scripts/bench-compare.py and
scripts/ttt_compare.py). Debian 12's OpenBLAS (0.3.21) picks its kernels by CPUID model; on a CPU it
does not know (an Intel Xeon of CPUID family 6 model 207, 2026-11-28) it falls back to its SSE3
"Prescott" kernels although the CPU has AVX-512: PyTorch fp32 then ran the demo's time-to-train
recipe at 155 sequences/s, and at 333 with OPENBLAS_CORETYPE=SkylakeX, OpenBLAS's documented
override (docs/PERFORMANCE-ttt.md). On an AMD Zen 5 with AVX-512 (CPUID family 26 model 2,
2026-12-02) it picks its AVX2 "Haswell" kernels: the same recipe ran 474 sequences/s, and 590 with
the override. A PyTorch user who notices sets it; so do these scripts, wherever OpenBLAS reports a
core without AVX-512 kernels on a CPU with AVX-512F."""
import ctypes
import functools
import os

# OpenBLAS 0.3.21's x86-64 cores with AVX-512 kernels (openblas_get_corename's names, lower case).
AVX512_CORES = {"skylakex", "cooperlake", "sapphirerapids"}


@functools.lru_cache(maxsize=None)  # one probe per library, however many peers share it
def core_override(lib_dir):
    """{"OPENBLAS_CORETYPE": "SkylakeX"} where lib_dir's libopenblas.so.0 picks a core without
    AVX-512 kernels (Prescott, Haswell, Zen, ...) on an AVX-512 CPU, else {} (also where the library
    or /proc/cpuinfo cannot be read)."""
    try:
        lib = ctypes.CDLL(os.path.join(lib_dir, "libopenblas.so.0"))
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core = lib.openblas_get_corename().decode()
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except (OSError, AttributeError, UnicodeDecodeError):
        return {}
    return {"OPENBLAS_CORETYPE": "SkylakeX"} if core.lower() not in AVX512_CORES and "avx512f" in flags else {}


def with_core_override(env):
    """env (a peer's environment) plus the override for the OpenBLAS its LD_LIBRARY_PATH selects."""
    lib_dir = env.get("LD_LIBRARY_PATH", "")
    return dict(env, **core_override(lib_dir)) if "openblas" in lib_dir else dict(env)
