"""Human-facing output: tables and plots. Results stay records; these only render them."""

from pathlib import Path

from ..errors import GpusimError


def plot_directory(path, flag: str = "--plot") -> Path:
    """`path` as the directory plots are written under, created where missing; where it cannot be (an existing
    file, a path without permission) a one-line GpusimError naming `flag` and the path."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:
        raise GpusimError(f"{flag} {path}: cannot create the directory "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    return out


def save_figure(fig, path: Path, flag: str = "--plot", **savefig) -> Path:
    """fig.savefig(path) and the figure closed; a path that cannot be written is a one-line GpusimError naming
    `flag` and the file."""
    import matplotlib.pyplot as plt

    try:
        fig.savefig(path, **savefig)
    except OSError as exc:
        raise GpusimError(f"{flag} {path.parent}: cannot write {path.name} ({exc.strerror or exc})") from None
    finally:
        plt.close(fig)
    return path
