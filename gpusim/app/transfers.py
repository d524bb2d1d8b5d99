"""How long copies and all-reduces take, from the arch file's `interconnect` and `memory.dram` figures (pure
functions: spec and bytes in, seconds out). GB/s are 10^9 bytes a second, as the datasheets and nccl-tests count.

* h2d, d2h: host_latency_us + bytes / h2d_bandwidth_gbs (d2h_bandwidth_gbs);
* d2d: host_latency_us + bytes read at the DRAM's streaming-read rate + bytes written at its write rate
  (bandwidth_gbs x read_efficiency, x write_efficiency: a copy both reads and writes every byte);
* p2p: nvlink_latency_us + bytes / nvlink_bandwidth_gbs; without NVLink, over the host link:
  host_latency_us + bytes / min(d2h of the source, h2d of the destination);
* all-reduce over n GPUs, a ring (nccl-tests doc/PERFORMANCE.md): 2(n-1) steps, each a latency, and each GPU
  sends 2(n-1)/n of the bytes: t = latency x 2(n-1) + 2(n-1)/n x bytes / bus bandwidth, the bus bandwidth the
  measured one (allreduce_bus_bandwidth_gbs, nccl-tests' busbw, which is defined by this formula) where the file
  has it, else the NVLink bandwidth, else the host link's; the latency NVLink's, else the host link's.
"""

from __future__ import annotations

from ..errors import GpusimError

GB = 1e9
US = 1e-6


def interconnect_of(spec):
    """The spec's interconnect section; a one-line error where the arch file has none."""
    link = spec.interconnect
    if link is None:
        raise GpusimError(f"arch {spec.name}: no interconnect section: copies and all-reduces need its host link and "
                          f"NVLink figures (see `gpusim archs --fields`, interconnect.*)")
    return link


def host_link_gbs(spec) -> float:
    """The slower direction of the host link (what a peer copy or a collective without NVLink is held to)."""
    link = interconnect_of(spec)
    return min(link.h2d_bandwidth_gbs, link.d2h_bandwidth_gbs)


def copy_seconds(spec, kind: str, nbytes: int) -> float:
    """Seconds a copy of `nbytes` of `kind` (h2d, d2h, d2d, p2p) takes on `spec`, from its start on a copy engine."""
    link = interconnect_of(spec)
    if kind == "h2d":
        return link.host_latency_us * US + nbytes / (link.h2d_bandwidth_gbs * GB)
    if kind == "d2h":
        return link.host_latency_us * US + nbytes / (link.d2h_bandwidth_gbs * GB)
    if kind == "d2d":
        dram = spec.memory.dram
        read, write = dram.bandwidth_gbs * dram.read_efficiency, dram.bandwidth_gbs * dram.write_efficiency
        return link.host_latency_us * US + nbytes / (read * GB) + nbytes / (write * GB)
    if kind == "p2p":
        if link.nvlink_bandwidth_gbs is not None:
            return link.nvlink_latency_us * US + nbytes / (link.nvlink_bandwidth_gbs * GB)
        return link.host_latency_us * US + nbytes / (host_link_gbs(spec) * GB)
    raise GpusimError(f"copy kind {kind!r}: expected h2d, d2h, d2d or p2p")


def allreduce_bus_gbs(spec) -> float:
    """The bus bandwidth an all-reduce runs at: measured, else NVLink's, else the host link's."""
    link = interconnect_of(spec)
    if link.allreduce_bus_bandwidth_gbs is not None:
        return link.allreduce_bus_bandwidth_gbs
    if link.nvlink_bandwidth_gbs is not None:
        return link.nvlink_bandwidth_gbs
    return host_link_gbs(spec)


def allreduce_step_us(spec) -> float:
    """One ring step's latency: NVLink's, else the host link's."""
    link = interconnect_of(spec)
    return link.nvlink_latency_us if link.nvlink_latency_us is not None else link.host_latency_us


def allreduce_seconds(spec, nbytes: int, gpus: int) -> float:
    """Seconds a ring all-reduce of `nbytes` over `gpus` GPUs takes (0 on one GPU: nothing to exchange)."""
    if gpus <= 1:
        interconnect_of(spec)
        return 0.0
    steps = 2 * (gpus - 1)
    return allreduce_step_us(spec) * US * steps + steps / gpus * nbytes / (allreduce_bus_gbs(spec) * GB)


def copy_links(kind: str, src: int, dst: int, nvlink: bool) -> list[tuple[str, int]]:
    """The link directions a copy occupies, each carrying one transfer at a time: ("h2d", gpu) and ("d2h", gpu) are a
    GPU's host link, ("nvlink-out", gpu) and ("nvlink-in", gpu) its NVLink ports; a d2d copy stays in the GPU."""
    if kind == "h2d":
        return [("h2d", dst)]
    if kind == "d2h":
        return [("d2h", src)]
    if kind == "p2p":
        return sorted([("nvlink-out", src), ("nvlink-in", dst)] if nvlink else [("d2h", src), ("h2d", dst)])
    return []


def allreduce_links(gpus: int, nvlink: bool) -> list[tuple[str, int]]:
    """The link directions an all-reduce occupies: both directions of every GPU's NVLink (or host link)."""
    names = ("nvlink-in", "nvlink-out") if nvlink else ("d2h", "h2d")
    return sorted((name, gpu) for name in names for gpu in range(gpus))


__all__ = ["allreduce_bus_gbs", "allreduce_links", "allreduce_seconds", "allreduce_step_us", "copy_links",
           "copy_seconds", "host_link_gbs", "interconnect_of"]
