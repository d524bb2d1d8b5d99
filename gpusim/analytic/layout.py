"""Where the SMs sit: the GPU -> GPC -> TPC -> SM layout the engine builds and the cluster calculator counts."""

from __future__ import annotations

import itertools

from ..errors import GpusimError


def sm_layout(spec, sms: int | None = None) -> list[list[list[int]]]:
    """SM indices grouped [gpc][tpc][sm]: TPCs dealt round-robin over GPCs, as evenly as the part allows."""
    st = spec.structure
    total = spec.sms if sms is None else sms
    if not 1 <= total <= spec.sms:
        raise GpusimError(f"--sms {total}: expected 1 to {spec.sms} for {spec.name}")
    tpcs = -(-total // st.sms_per_tpc)
    gpcs: list[list[list[int]]] = [[] for _ in range(st.gpcs)]
    for t in range(tpcs):
        gpcs[t % st.gpcs].append([])
    index = 0
    for tpc in itertools.chain.from_iterable(itertools.zip_longest(*gpcs)):
        if tpc is None:
            continue
        for _ in range(st.sms_per_tpc):
            if index < total:
                tpc.append(index)
                index += 1
    return [g for g in gpcs if g]


__all__ = ["sm_layout"]
