"""A sweep's output file (.csv appended row by row, .json or .parquet rewritten), read back for `--resume`, and the
rows a sweep returns (`SweepRows`: a list of dicts, `.to_pandas()` for a DataFrame).
"""

from __future__ import annotations

import csv
import errno
import json
import math
import os
import sys
import time
from pathlib import Path

from ..errors import GpusimError, one_line, shorten, shown
from .points import ERROR, LIMITER, OCCUPANCY, WALL, plain_value, value_key


FORMATS = (".csv", ".json", ".parquet")
REWRITE_EVERY = 1.0  # seconds between rewrites of a .json or .parquet output (a .csv is appended to)


class Output:
    """The output file (.csv, .json or .parquet), written as rows finish: a CSV is appended to (each batch of rows
    whole, flushed and synced to the disk, or cut back to where it was), a JSON list or a Parquet table rewritten
    (at most once a second, and at the end) through a temporary file renamed over it. Every write error is a
    one-line GpusimError naming the file, and no temporary file is left behind."""

    def __init__(self, path, columns: list[str]):
        self.path, self.columns = Path(path), list(columns)
        self.format = self.path.suffix.lower()
        if self.format not in FORMATS:
            raise GpusimError(f"--out {shown(str(path), 60)}: expected a .csv, .json or .parquet file")
        if self.format == ".parquet":
            try:
                import pandas  # noqa: F401
                import pyarrow  # noqa: F401
            except ImportError:
                raise GpusimError("--out .parquet needs pandas and pyarrow: pip install pandas pyarrow") from None
        self.rows: list[dict] = []
        self.written = 0.0

    def read(self) -> list[dict | None]:
        """The rows already in the file ([] where there is none), for --resume: a dict per row, None for one that
        cannot be read back (a CSV line cut short or unparsable, a JSON item that is not an object). A file of
        other columns, or none of this sweep's format, is a GpusimError."""
        if not self.path.exists():
            return []
        if not self.path.is_file():  # a directory, a device (/dev/zero reads forever), a pipe
            raise GpusimError(f"--resume: {self.path} is not a regular file")
        try:
            if self.format == ".csv":
                return self._read_csv()
            if self.format == ".json":
                return self._read_json()
            import pandas

            frame = pandas.read_parquet(self.path)
            self._check_columns(list(frame.columns))
            return [{k: plain_value(None if _missing(v) else v) for k, v in r.items()}
                    for r in frame.to_dict(orient="records")]
        except GpusimError:
            raise
        except RecursionError:
            raise GpusimError(f"--resume: cannot read {self.path} (nested too deeply to be a list of rows)") from None
        except Exception as exc:  # OSError, a decoding or parsing error of any kind
            raise GpusimError(f"--resume: cannot read {self.path} ({_why(exc)})") from None

    def _check_columns(self, found: list) -> None:
        if found and list(found) != self.columns:
            columns = one_line(", ".join(map(str, found)))[:300]
            raise GpusimError(f"--resume: {self.path} has the columns {columns}, not this "
                              f"sweep's ({', '.join(self.columns)[:300]}): another --out, or the same --vary and "
                              f"--metrics")

    def _read_csv(self) -> list[dict | None]:
        """Line by line: a line is a row (the rows hold no line breaks), the last one cut short where the file
        does not end with one (a write interrupted), and a file holding less than its header line holds none."""
        header = _csv_text([], self.columns, header=True)
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        tail = lines.pop()  # after the last line break: b"" or a line cut short
        if not lines:
            if header.encode().startswith(tail):
                return []
            lines = [tail]
        try:
            found = next(csv.reader([lines[0].decode("utf-8")], strict=True), [])
        except (UnicodeDecodeError, csv.Error) as exc:
            raise GpusimError(f"--resume: cannot read {self.path}'s header line ({_why(exc)})") from None
        self._check_columns(found or ["(an empty line)"])
        rows = [self._csv_line(raw) for raw in lines[1:] if raw.strip()]
        return rows + [None] if tail.strip() else rows

    def _csv_line(self, raw: bytes) -> dict | None:
        try:
            cells = list(csv.reader([raw.decode("utf-8")], strict=True))
        except (UnicodeDecodeError, csv.Error):
            return None
        if len(cells) != 1 or len(cells[0]) != len(self.columns):
            return None
        return {c: _typed(c, v) for c, v in zip(self.columns, cells[0])}

    def _read_json(self) -> list[dict | None]:
        with open(self.path, encoding="utf-8") as fh:
            rows = json.load(fh)  # (NaN and Infinity read as floats: such a row is run again)
        if not isinstance(rows, list):
            raise GpusimError(f"--resume: cannot read {self.path} (expected a list of rows, got a "
                              f"{type(rows).__name__})")
        first = next((r for r in rows if isinstance(r, dict)), None)
        self._check_columns(list(first) if first is not None else [])
        return [r if isinstance(r, dict) else None for r in rows]

    def start(self, rows: list[dict]) -> None:
        """The file, holding `rows` (a fresh sweep: none)."""
        self.rows = list(rows)
        self._rewrite()

    def add(self, rows: list[dict], *, final: bool = False) -> None:
        self.rows.extend(rows)
        if self.format == ".csv":
            if rows:
                self._append(_csv_text(rows, self.columns).encode("utf-8"))
        elif final or time.monotonic() - self.written >= REWRITE_EVERY:
            self._rewrite()

    def finish(self, rows: list[dict] | None = None) -> None:
        """The last write: `rows` (when given) replace what is there, in this order."""
        if rows is not None:
            self.rows = list(rows)
            self._rewrite()
        elif self.format != ".csv":
            self._rewrite()

    def _failed(self, exc: BaseException) -> GpusimError:
        return GpusimError(f"--out {self.path}: cannot write ({_why(exc)})")

    def _append(self, data: bytes) -> None:
        """`data` (whole lines) at the end of the file, synced; where that fails, the file cut back to its length
        before, so that it never holds part of a row."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except (OSError, ValueError) as exc:
            raise self._failed(exc) from None
        try:
            start = os.lseek(fd, 0, os.SEEK_END)
        except OSError:
            start = None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            _sync(fd)
        except OSError as exc:
            if start is not None:
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass
            raise self._failed(exc) from None
        finally:
            os.close(fd)

    def _rewrite(self) -> None:
        """The whole file, written to a temporary file beside it, synced and renamed over it."""
        temporary = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            name = f".{self.path.name}.{os.getpid()}.tmp"
            if self.format == ".parquet":
                frame = as_frame(self.rows, self.columns)
                temporary = self.path.with_name(name)
                frame.to_parquet(temporary, index=False)
                data = None
            elif self.format == ".csv":
                data = _csv_text(self.rows, self.columns, header=True).encode("utf-8")
            else:
                data = (json.dumps(self.rows, indent=1, allow_nan=False) + "\n").encode("utf-8")
            if data is not None:
                temporary = self.path.with_name(name)
                with open(temporary, "wb") as fh:
                    fh.write(data)
            fd = os.open(temporary, os.O_RDONLY)
            try:
                _sync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, self.path)
            temporary = None
        except GpusimError:
            raise
        except Exception as exc:  # OSError, a value JSON or Parquet cannot hold, ...
            raise self._failed(exc) from None
        finally:
            if temporary is not None:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
        self.written = time.monotonic()


def _sync(fd: int) -> None:
    """fsync, where the file supports it (a pipe or a character device does not)."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EROFS):
            raise


def _why(exc: BaseException) -> str:
    """An exception as the end of a one-line message."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else one_line(str(exc))
    return shorten(text, 200).strip("'\"") if text else type(exc).__name__


def _csv_text(rows: list[dict], columns: list[str], header: bool = False) -> str:
    """Rows as CSV lines, each ended by a line break (the header line first where `header`)."""
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    if header:
        writer.writeheader()
    writer.writerows(_csv_row(r) for r in rows)
    return buffer.getvalue()


def _csv_row(row: dict) -> dict:
    return {k: "" if v is None else v for k, v in row.items()}


def _missing(value) -> bool:
    return value is None or isinstance(value, float) and math.isnan(value)


def _typed(column: str, text: str | None):
    """A CSV cell as the row had it: '' -> None (but '' for the error and limiter), numbers as numbers (a
    non-finite one too: such a row is run again), other text as text."""
    if column in (ERROR, LIMITER):
        return text or ""
    if text is None or text == "":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except (ValueError, OverflowError):
            continue
    return text


def _usable(row, columns: list[str], measured: list[str]) -> bool:
    """Whether a row read back from the output is a finished point that --resume keeps: a dict of exactly the
    sweep's columns, each of the `measured` ones (the metrics, the theoretical occupancy) empty or a finite
    number, the error and the limiter text, the wall time a finite number, and metrics or an error."""
    if not isinstance(row, dict) or set(row) != set(columns) or len(row) != len(columns):
        return False
    if not isinstance(row[ERROR], str) or not isinstance(row[LIMITER], str) or not _finite(row[WALL]):
        return False
    values = [row[m] for m in measured]
    if not all(v is None or _finite(v) for v in values):
        return False
    return bool(row[ERROR]) or any(v is not None for v in values)


def _finite(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


def as_frame(rows: list[dict], columns: list[str]):
    import pandas

    return pandas.DataFrame(rows, columns=columns)


class SweepRows(list):
    """What gpusim.sweep returns: its rows, one dict per point in point order (the first variation slowest), each
    with `columns` in order; `to_pandas()` makes them a DataFrame (pandas needed)."""

    def __init__(self, rows: list[dict], columns: list[str]):
        super().__init__(rows)
        self.columns = list(columns)

    def to_pandas(self):
        try:
            return as_frame(list(self), self.columns)
        except ImportError:
            raise GpusimError("SweepRows.to_pandas() needs pandas: pip install pandas") from None


def resumed_rows(output: Output, tasks: list[dict], names: list[str], measured: list[str]) -> dict[int, dict]:
    """--resume: the finished points' rows in the output, by point index, each as the sweep writes it (its
    columns in order, its varied values as the point has them). A row that is not a finished point (cut short,
    unreadable, a metric that is not a finite number, neither metrics nor an error) is left out, so its point runs
    again; so is a row of no point of this sweep, or a second row of one. One line on stderr counts them."""
    index = {tuple(value_key(v) for v in t["values"].values()): t["index"] for t in tasks}
    done: dict[int, dict] = {}
    unusable = ignored = 0
    for row in output.read():
        if not _usable(row, output.columns, measured):
            unusable += 1
            continue
        i = index.get(tuple(value_key(row[n]) for n in names))
        if i is None or i in done:
            ignored += 1
            continue
        done[i] = {c: row[c] for c in output.columns} | tasks[i]["values"]
    said = []
    if unusable:
        said.append(f"{unusable:,} row{'s' if unusable != 1 else ''} not a finished point (cut short, unreadable, "
                    f"a metric that is not a finite number, or neither metrics nor an error): run again")
    if ignored:
        said.append(f"{ignored:,} row{'s' if ignored != 1 else ''} of no point of this sweep, or repeating one: "
                    f"ignored (left out of the file)")
    if said:
        print(f"note: --resume {output.path}: " + "; ".join(said), file=sys.stderr)
    return done


def columns_of(vary_names: list[str], metrics: list[str]) -> list[str]:
    """A row's columns: the varied values, the metrics, the theoretical occupancy and its limiter, error, wall_s."""
    return list(vary_names) + [m for m in metrics if m != OCCUPANCY] + [OCCUPANCY, LIMITER, ERROR, WALL]


