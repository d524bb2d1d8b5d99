"""Architecture specs: frozen attrs classes and the YAML loader."""

from .clocking import clocked
from .load import arch_dir, known_archs, load_arch, load_arch_file, parse_arch
from .spec import ArchSpec

__all__ = ["ArchSpec", "arch_dir", "clocked", "known_archs", "load_arch", "load_arch_file", "parse_arch"]
