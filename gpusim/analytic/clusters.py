"""Thread block cluster occupancy: how many clusters can be resident on the whole GPU at once, the number CUDA's
cudaOccupancyMaxActiveClusters reports, with the per-GPC detail behind it.

The rules, and where each comes from:

* Clusters exist from compute capability 9.0 (Hopper) on [PG: CUDA C++ Programming Guide, "Thread Block
  Clusters"]; earlier parts (V100, T4, A100, L40S) refuse a cluster launch.
* A cluster is 1 to 3 dimensions of blocks, each dimension >= 1; the size is x*y*z and need not be a power of two
  (a 3x1x1 cluster launches: NVIDIA developer forum, "Cluster size limitation", thread 279795). At most 8 blocks
  is the portable size [PG]; Hopper and Blackwell data-centre parts (cc 9.0, 10.0, 10.3) take up to 16 when the
  kernel sets cudaFuncAttributeNonPortableClusterSizeAllowed [PG; NVIDIA Warp docs, get_cuda_max_cluster_dim:
  "Hopper and Blackwell desktop parts typically support 16", integrated parts cap at 8]. Without the attribute a
  size of 9-16 is refused with CUDA_ERROR_INVALID_CLUSTER_SIZE (cupy/cupy#8778, on an H100); above 16 it is
  refused always (NVIDIA/Fuser's GetMaxActiveClusters test: sizes 1-16 > 0 on cc 9.0 and 10.0, 17 is 0). A
  launch's grid must be a multiple of the cluster in each dimension; the occupancy query has no grid, so that
  check belongs to the launch, not here.
* All blocks of a cluster are co-scheduled at once on the SMs of ONE GPC [PG; cuda.core LaunchConfig docs].
* A cluster's blocks sit on distinct SMs: the guide says the maximum cluster size is reduced "on GPU hardware or
  MIG configurations which are too small to support 8 multiprocessors", i.e. a cluster of N needs N SMs of its
  GPC; accel-sim/gpu-app-collection#87 (%smid of every block of 4x2x1 clusters on an H100) shows each cluster on
  8 different SMs (its 4 TPCs), and two clusters sharing the same SMs when the SMs have room for two blocks.
* Each SM holds `blocks_per_sm` blocks, the plain per-SM occupancy (gpusim.analytic.occupancy) of the launch.

So a GPC of S SMs holds floor(S * blocks_per_sm / size) clusters when size <= S, and none when size > S: dealing
the S * blocks_per_sm block slots out SM by SM, round and round, any `size` consecutive slots lie on distinct SMs,
and no placement can hold more. The GPU's answer is the sum over GPCs.

Assumed, not measured (no GPU was at hand to run cudaOccupancyMaxActiveClusters):
* The driver counts every free block slot (the bound above) rather than, say, blocks_per_sm whole layers of
  floor(S / size) clusters. The two agree whenever blocks_per_sm is 1 (the persistent kernels the published
  numbers come from) or size divides S; they differ only for several blocks per SM and a size that does not
  divide the GPC (18 SMs, 2 blocks each, size 4: 9 here, 8 by layers).
* No per-GPC cap on resident clusters beyond the block slots (none is documented for NVIDIA parts).
* The GPCs' sizes: a real part's floorsweeping decides them and differs from chip to chip, and NVIDIA does not
  publish them. We use the engine's layout (gpusim.analytic.layout.sm_layout: TPCs dealt round-robin over the
  GPCs), so the calculator and the simulated GPU agree: an H100 SXM (66 TPCs, 8 GPCs) is 2 GPCs of 18 SMs and 6
  of 16, giving 66 clusters of 2, 32 of 4, 16 of 8 and 8 of 16 at one block per SM. Measured H100s can hold fewer
  of the large sizes: the accel-sim run above fitted 17 clusters of 8 on only 120 SMs (so that chip had at most 15
  one-block-per-SM slots for clusters of 8), and cuBLAS launched 120 CTAs of 8-block clusters on an H100 SXM where
  CUTLASS's 18-SMs-per-GPC heuristic chose 112 (NVIDIA/cutlass#1921).
"""

from __future__ import annotations

import attrs

from ..arch import ArchSpec, load_arch
from ..errors import shorten
from .layout import sm_layout
from .occupancy import OccupancyResult, occupancy

PORTABLE_MAX_CLUSTER_SIZE = 8  # [PG] guaranteed on every part that has clusters
FIRST_CLUSTER_COMPUTE_CAPABILITY = 9  # [PG] clusters arrive with Hopper
# Largest size with cudaFuncAttributeNonPortableClusterSizeAllowed, by compute capability; a part not listed
# (an arch file of another capability) is held to the portable size.
NON_PORTABLE_MAX_CLUSTER_SIZE = {"9.0": 16, "10.0": 16, "10.3": 16}


@attrs.frozen
class GpcClusters:
    """One GPC's share of the answer."""
    gpc: int
    sms: int
    block_slots: int  # sms x blocks_per_sm
    clusters: int
    unused_block_slots: int  # slots no whole cluster can take

    def to_dict(self) -> dict:
        return attrs.asdict(self)


@attrs.frozen
class ClusterOccupancyResult:
    arch: str
    cluster_dims: tuple[int, int, int]
    cluster_size: int
    non_portable: bool
    max_cluster_size: int  # the largest size this launch may ask for (portable, or non-portable with the flag)
    blocks_per_sm: int
    sms: int
    resident_blocks: int  # blocks_per_sm x SMs: what the GPU holds without clusters
    max_active_clusters: int  # what cudaOccupancyMaxActiveClusters reports
    active_blocks: int  # max_active_clusters x cluster_size
    per_gpc: tuple[GpcClusters, ...]
    occupancy: OccupancyResult  # the per-SM occupancy the clusters are built on
    reason: str  # why max_active_clusters is 0; empty when it is not

    def to_dict(self) -> dict:
        """The per-SM occupancy record with the cluster answer beside it, flat."""
        d = self.occupancy.to_dict()
        d.update(cluster_dims=list(self.cluster_dims), cluster_size=self.cluster_size,
                 non_portable=self.non_portable, max_cluster_size=self.max_cluster_size, sms=self.sms,
                 resident_blocks=self.resident_blocks, max_active_clusters=self.max_active_clusters,
                 active_blocks=self.active_blocks, per_gpc=[g.to_dict() for g in self.per_gpc],
                 cluster_reason=self.reason)
        return d


def max_cluster_size(spec: ArchSpec, non_portable: bool = False) -> int:
    """The largest cluster `spec` launches: 0 before cc 9.0, else 8, or the part's non-portable maximum."""
    if spec.cc_major < FIRST_CLUSTER_COMPUTE_CAPABILITY:
        return 0
    if non_portable:
        return NON_PORTABLE_MAX_CLUSTER_SIZE.get(spec.compute_capability, PORTABLE_MAX_CLUSTER_SIZE)
    return PORTABLE_MAX_CLUSTER_SIZE


def check_cluster(spec: ArchSpec, cluster, non_portable: bool = False) -> tuple[int, int, int]:
    """The cluster's (x, y, z) when `spec` can launch it; ValueError with one line saying why not otherwise."""
    dims = tuple(cluster) if isinstance(cluster, (tuple, list)) else (cluster,)
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        shown = ",".join(map(str, dims)) if all(isinstance(d, int) for d in dims) else shorten(cluster)
        raise ValueError(f"cluster {shown}: expected 1 to 3 dimensions, each an integer >= 1")
    x, y, z = (*dims, 1, 1)[:3]
    size = x * y * z
    limit = max_cluster_size(spec, non_portable)
    if limit == 0:
        raise ValueError(f"cluster {x},{y},{z}: thread block clusters need compute capability "
                         f"{FIRST_CLUSTER_COMPUTE_CAPABILITY}.0 or newer; {spec.name} is {spec.compute_capability}")
    if size > limit:
        wider = max_cluster_size(spec, True)
        hint = (f" (up to {wider} when the kernel allows a non-portable size: --non-portable)"
                if not non_portable and limit < size <= wider else "")
        raise ValueError(f"cluster {x},{y},{z}: {size} blocks, more than the {limit} {spec.name} launches"
                         f"{' non-portably' if non_portable else ''}{hint}")
    return x, y, z


def gpc_sizes(spec: ArchSpec) -> list[int]:
    """SMs in each GPC, as the engine builds the GPU."""
    return [sum(len(tpc) for tpc in gpc) for gpc in sm_layout(spec)]


def clusters_in_gpc(sms: int, blocks_per_sm: int, cluster_size: int) -> int:
    """Clusters one GPC holds: its block slots over the size, when the cluster fits on distinct SMs of it."""
    return 0 if cluster_size > sms else sms * blocks_per_sm // cluster_size


def cluster_occupancy(arch: str | ArchSpec, threads_per_block: int, regs_per_thread: int, cluster,
                      smem_per_block: int = 0, carveout: int | None = None, barriers_per_block: int = 1,
                      non_portable: bool = False) -> ClusterOccupancyResult:
    """The most clusters of shape `cluster` ((x, y, z), (x, y), or x) resident at once on `arch`, per GPC and in
    all, for a launch as `occupancy` takes it. `non_portable`: the kernel allows a non-portable cluster size.
    Raises ValueError for a launch or cluster the part refuses."""
    spec = load_arch(arch)
    dims = check_cluster(spec, cluster, non_portable)
    size = dims[0] * dims[1] * dims[2]
    occ = occupancy(spec, threads_per_block, regs_per_thread, smem_per_block, carveout, barriers_per_block)
    b = occ.blocks_per_sm
    per_gpc = []
    for g, sms in enumerate(gpc_sizes(spec)):
        clusters = clusters_in_gpc(sms, b, size)
        per_gpc.append(GpcClusters(gpc=g, sms=sms, block_slots=sms * b, clusters=clusters,
                                   unused_block_slots=sms * b - clusters * size))
    total = sum(g.clusters for g in per_gpc)
    reason = ""
    if b == 0:
        reason = f"no block can be resident: {occ.reason}"
    elif total == 0:
        reason = (f"a cluster of {size} blocks needs {size} SMs of one GPC; the largest GPC of {spec.name} has "
                  f"{max(g.sms for g in per_gpc)}")
    return ClusterOccupancyResult(
        arch=spec.name, cluster_dims=dims, cluster_size=size, non_portable=non_portable,
        max_cluster_size=max_cluster_size(spec, non_portable), blocks_per_sm=b, sms=spec.sms,
        resident_blocks=b * spec.sms, max_active_clusters=total, active_blocks=total * size,
        per_gpc=tuple(per_gpc), occupancy=occ, reason=reason)


def max_active_clusters(arch: str | ArchSpec, threads_per_block: int, regs_per_thread: int, cluster,
                        smem_per_block: int = 0, carveout: int | None = None, barriers_per_block: int = 1,
                        non_portable: bool = False) -> int:
    """The number cudaOccupancyMaxActiveClusters returns; see cluster_occupancy for the detail."""
    return cluster_occupancy(arch, threads_per_block, regs_per_thread, cluster, smem_per_block, carveout,
                             barriers_per_block, non_portable).max_active_clusters


def parse_cluster(text: str) -> tuple[int, ...]:
    """'2', '2,1' or '2,1,1' as the dimensions; ValueError (one line) for anything else."""
    parts = str(text).split(",")
    if not 1 <= len(parts) <= 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"cluster {shorten(text, 40)}: expected x[,y[,z]], 1 to 3 comma-separated integers >= 1, "
                         f"e.g. 2 or 2,1,1")
    return tuple(int(p) for p in parts)
