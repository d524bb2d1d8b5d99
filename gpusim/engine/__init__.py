"""The cycle-level engine: GPU -> GPC -> TPC -> SM -> sub-partitions, CTA dispatch, warp scheduling."""
