"""How a GPU talks to its host and to other GPUs: the host link (PCI Express), its copy engines, NVLink and the
all-reduce bandwidth of the usual multi-GPU system. Applications (gpusim.app) time copies and collectives with these
numbers; the cycle-level engine does not read them."""

from __future__ import annotations

import attrs

from .fields import OrAbsent, TrueOrFalse, count_range, number_range, spec_field

MAX_LINK_GBS = 100_000  # GB/s: fifty times the fastest NVLink, finite so a hostile file stays bounded
MAX_LINK_US = 10_000  # microseconds: far above any real link's, finite


def _link_rate(doc: str, absent: str | None = None):
    rate = number_range(0, MAX_LINK_GBS)
    if absent is None:
        return spec_field(doc, "GB/s", rate)
    return spec_field(f"{doc}; absent: {absent}", "GB/s", OrAbsent(rate), default=None)


@attrs.frozen
class InterconnectSpec:
    """The host link, copy engines, NVLink and all-reduce figures of one GPU (per GPU, in the usual 8-GPU system)."""

    pcie_generation: int = spec_field("PCI Express generation of the host link (16 lanes)", "generation",
                                      count_range(16))
    h2d_bandwidth_gbs: float = spec_field(
        "host-to-device copy bandwidth from pinned memory (a copy engine's cudaMemcpy): measured where a measurement "
        "exists, else the link's theoretical x16 payload rate", "GB/s", number_range(0, MAX_LINK_GBS))
    d2h_bandwidth_gbs: float = spec_field(
        "device-to-host copy bandwidth to pinned memory (measured where a measurement exists, else theoretical)",
        "GB/s", number_range(0, MAX_LINK_GBS))
    host_latency_us: float = spec_field(
        "time from a copy's start to its first byte (the runtime's submission and the DMA set-up): the fixed part "
        "of every host-device and device-to-device copy", "us", number_range(0, MAX_LINK_US))
    copy_engines: int = spec_field("copy engines (asyncEngineCount): copies one GPU runs at once", "engines",
                                   count_range(64))
    nvlink_bandwidth_gbs: float | None = _link_rate(
        "NVLink bandwidth per GPU per direction (all its links together)", "the part has no NVLink")
    nvlink_latency_us: float | None = spec_field(
        "latency of one transfer over NVLink (a peer copy's first byte, one step of a ring all-reduce); absent: the "
        "part has no NVLink", "us", OrAbsent(number_range(0, MAX_LINK_US)), default=None)
    nvswitch: bool = spec_field("whether the usual 8-GPU system of this part connects every GPU to every other "
                                "through NVSwitch", validator=TrueOrFalse(), default=False)
    allreduce_bus_bandwidth_gbs: float | None = _link_rate(
        "measured NCCL all-reduce bus bandwidth on the usual 8-GPU system, large messages (nccl-tests busbw)",
        "not measured (an all-reduce then runs at nvlink_bandwidth_gbs, or the host link without NVLink)")

    def __attrs_post_init__(self):
        if (self.nvlink_bandwidth_gbs is None) != (self.nvlink_latency_us is None):
            given = "nvlink_bandwidth_gbs" if self.nvlink_latency_us is None else "nvlink_latency_us"
            missing = "nvlink_latency_us" if self.nvlink_latency_us is None else "nvlink_bandwidth_gbs"
            raise ValueError(f"{missing}: expected with {given} (a part with NVLink states both)")


__all__ = ["InterconnectSpec", "MAX_LINK_GBS", "MAX_LINK_US"]
