"""One access layer for the GPUs, shared by the doctor and by telemetry.

- :mod:`.busid`: PCI bus ids in one canonical form (``0000:cd:00.0``)
- :mod:`.values`: values as tools and libraries return them ("N/A", "23028 MiB", bytes)
- :mod:`.nvml`: NVIDIA through NVML (nvidia-ml-py's ``pynvml``)
- :mod:`.amdsmi`: AMD through the ``amdsmi`` Python library
- :mod:`.sysfs`: amdgpu devices and PCIe links under ``/sys``

Every call here is guarded: a missing library, driver or device gives ``None`` or a
reason string, never an exception.
"""
