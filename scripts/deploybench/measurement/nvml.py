"""The measured GPU through NVML (nvidia-ml-py): what it is doing now and who else uses it.

Telemetry and host load must never fail a measurement: a missing nvidia-ml-py or driver, a
device NVML does not know, or a query the device does not support is an `Unavailable`
with NVML's reason, which the callers record instead of a figure.
"""

from __future__ import annotations

MIB = 2**20

# Clock event ("throttle") reason bits, as NVML names them (nvmlClocksEventReason*).
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


class Unavailable(RuntimeError):
    """NVML cannot give this: the message is the reason."""


def _nvml():
    try:
        import pynvml
    except ImportError as missing:
        raise Unavailable(f"nvidia-ml-py is not installed ({missing})") from None
    return pynvml


class Gpu:
    """An open NVML session on the device a step measured (`device.measured_device`: a
    GPU's or MIG instance's UUID, or `gpu-<index>`). A MIG instance answers for its own
    memory and processes; power, clocks and energy are its parent GPU's (NVML has them
    only there), shared with the other instances."""

    def __init__(self, device: str):
        nvml = self.nvml = _nvml()
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as error:
            raise Unavailable(f"NVML: {error}") from None
        try:
            if device.startswith(("GPU-", "MIG-")):
                self.handle = nvml.nvmlDeviceGetHandleByUUID(device)
            elif device.startswith("gpu-") and device[4:].isdigit():
                self.handle = nvml.nvmlDeviceGetHandleByIndex(int(device[4:]))
            else:
                raise Unavailable(f"not a GPU: {device!r}")
            self.mig = self._is_mig()
            self.parent = (nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self.handle)
                           if self.mig else self.handle)
        except nvml.NVMLError as error:
            self.close()
            raise Unavailable(f"NVML: {error} (device {device})") from None
        except Unavailable:
            self.close()
            raise
        self.device = device

    def _is_mig(self) -> bool:
        try:
            return bool(self.nvml.nvmlDeviceIsMigDeviceHandle(self.handle))
        except self.nvml.NVMLError:  # a driver before MIG: no instance
            return False

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass

    def __enter__(self) -> Gpu:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def read(self, what: str):
        """One reading (see READINGS); NVML's refusal as Unavailable."""
        try:
            return READINGS[what](self)
        except self.nvml.NVMLError as error:
            raise Unavailable(f"NVML: {error}") from None

    def _reasons(self) -> list[str]:
        for name in ("nvmlDeviceGetCurrentClocksEventReasons",
                     "nvmlDeviceGetCurrentClocksThrottleReasons"):
            try:
                bits = getattr(self.nvml, name)(self.parent)
                break
            except (AttributeError, self.nvml.NVMLError_FunctionNotFound):
                continue
        else:
            raise Unavailable("no clock event reasons in this driver")
        return [name for bit, name in CLOCK_EVENT_REASONS.items() if bits & bit]

    def processes(self) -> list[dict]:
        """The compute and graphics processes on this device (a MIG instance: its own):
        pid, kind and GPU memory used (MiB; None where NVML does not say)."""
        found = {}
        for kind in ("Compute", "Graphics"):
            for version in ("_v3", "_v2", ""):  # an older driver lacks the newer calls
                try:
                    call = getattr(self.nvml, f"nvmlDeviceGet{kind}RunningProcesses{version}")
                    listed = call(self.handle)
                    break
                except (AttributeError, self.nvml.NVMLError_FunctionNotFound):
                    continue
                except self.nvml.NVMLError as error:
                    raise Unavailable(f"NVML: {error}") from None
            else:
                raise Unavailable(f"no {kind.lower()} process list in this driver")
            for p in listed:
                used = getattr(p, "usedGpuMemory", None)
                entry = found.setdefault(p.pid, {"pid": p.pid, "kind": kind.lower(),
                                                 "used_mib": None})
                if used is not None:
                    entry["used_mib"] = round(used / MIB, 1)
                if entry["kind"] != kind.lower():
                    entry["kind"] = "compute+graphics"
        return sorted(found.values(), key=lambda p: p["pid"])


READINGS = {
    "utilization_percent": lambda g: g.nvml.nvmlDeviceGetUtilizationRates(g.handle).gpu,
    "memory_used_mib": lambda g: g.nvml.nvmlDeviceGetMemoryInfo(g.handle).used / MIB,
    "power_w": lambda g: g.nvml.nvmlDeviceGetPowerUsage(g.parent) / 1e3,
    "sm_clock_mhz": lambda g: g.nvml.nvmlDeviceGetClockInfo(g.parent, g.nvml.NVML_CLOCK_SM),
    "clock_event_reasons": Gpu._reasons,
    # the GPU's energy counter since the driver loaded (Volta and newer), joules
    "energy_j": lambda g: g.nvml.nvmlDeviceGetTotalEnergyConsumption(g.parent) / 1e3,
}

