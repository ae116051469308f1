"""Device capability queries through the CUDA driver (libcuda), without JAX.

`device_supports_vmm` asks the driver directly through ctypes: it neither initializes JAX nor
loads jaxmg's engines, so it can decide `XLA_PYTHON_CLIENT_ALLOCATOR` before JAX starts.
"""

from __future__ import annotations

import ctypes

# CUdevice_attribute CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED (cuda.h).
_VMM_SUPPORTED = 102
_DRIVER = "libcuda.so.1"
_libcuda = None


def _driver():
    global _libcuda
    if _libcuda is None:
        try:
            _libcuda = ctypes.CDLL(_DRIVER)
        except OSError as e:
            raise RuntimeError(
                f"the CUDA driver library ({_DRIVER}) is not available: cannot query CUDA "
                "device capabilities on this machine"
            ) from e
    return _libcuda


def device_supports_vmm(device: int = 0) -> bool:
    """Whether CUDA device `device` supports virtual memory management (VMM).

    JAX's `vmm` GPU allocator needs it. The CUDA driver is asked directly (cuInit,
    cuDeviceGet, cuDeviceGetAttribute), independent of JAX: safe to call before JAX
    initializes its GPU backend.

    Args:
      device: a CUDA device ordinal (default 0).

    Returns:
      True when the device supports VMM, else False.

    Raises:
      TypeError: device is not an integer.
      RuntimeError: the CUDA driver is not available (no libcuda.so.1: a machine without
        an NVIDIA driver), cuInit fails (no usable GPU), or a query fails (e.g. no device
        of that ordinal).
    """
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device must be a CUDA device ordinal (an int), got {device!r}")
    lib = _driver()
    code = lib.cuInit(0)
    if code != 0:
        raise RuntimeError(f"cuInit failed (CUDA error {code}): no usable CUDA driver or GPU")
    handle = ctypes.c_int()
    code = lib.cuDeviceGet(ctypes.byref(handle), int(device))
    if code != 0:
        raise RuntimeError(f"cuDeviceGet failed for device ordinal {device} (CUDA error {code})")
    value = ctypes.c_int()
    code = lib.cuDeviceGetAttribute(ctypes.byref(value), _VMM_SUPPORTED, handle)
    if code != 0:
        raise RuntimeError(
            f"cuDeviceGetAttribute failed querying VMM support of device {device} "
            f"(CUDA error {code})"
        )
    return bool(value.value)
