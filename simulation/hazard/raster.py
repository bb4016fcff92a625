"""ESRI ASCII grid (``.asc``) reading and point sampling for flood-depth rasters.

The format is a short header followed by ``nrows`` rows of ``ncols`` numbers, northernmost row
first::

    ncols         4
    nrows         3
    xllcorner     1000.0
    yllcorner     2000.0
    cellsize      10.0
    NODATA_value  -9999
    0.0 0.5 1.2 -9999
    ...

Header keys are case-insensitive; ``xllcenter``/``yllcenter`` may replace the corner keys.
Errors raise :class:`~simulation.hazard.curves.HazardError` naming the file and the header key
or the line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simulation.hazard.curves import HazardError
from simulation.input_files import read_text

if TYPE_CHECKING:
    import os

__all__ = ["LEAST_CELLSIZE", "MOST", "AsciiGrid", "read_ascii_grid"]

#: No coordinate, cell size or value of a grid lies beyond this either way: larger ones are no
#: map, and overflowed the arithmetic of the checks on the grid (1e308 m as feet, a corner at
#: 1e308 plus the grid's width) to infinity.
MOST = 1e15
#: The smallest cell size a grid may have, in its coordinates' units: a point's offset divided
#: by a cell size of 1e-308 overflowed.
LEAST_CELLSIZE = 1e-6

_HEADER_KEYS = (
    "ncols",
    "nrows",
    "xllcorner",
    "xllcenter",
    "yllcorner",
    "yllcenter",
    "cellsize",
    "nodata_value",
)


@dataclass(frozen=True, slots=True)
class AsciiGrid:
    """A raster grid read from an ESRI ASCII file.

    Attributes:
        values: ``(nrows, ncols)`` read-only float array; row 0 is the northernmost row, as in
            the file; NODATA cells are NaN.
        xll: x of the grid's lower-left corner (a ``xllcenter`` header is converted).
        yll: y of the grid's lower-left corner.
        cellsize: Side length of the square cells, in the units of x and y.
        path: File the grid was read from, if any.
    """

    values: np.ndarray
    xll: float
    yll: float
    cellsize: float
    path: Path | None = None

    @property
    def nrows(self) -> int:
        """Number of rows."""
        return int(self.values.shape[0])

    @property
    def ncols(self) -> int:
        """Number of columns."""
        return int(self.values.shape[1])

    def sample(self, x: np.ndarray, y: np.ndarray, *, fill: float = 0.0) -> np.ndarray:
        """Value of the cell containing each point, for all points at once.

        Cells are half-open: a cell spans ``[west, east) x [south, north)``, so a point on a
        shared edge belongs to the cell east/north of it, the grid's lower-left corner belongs
        to the south-west cell, and points on the grid's east or north border are outside.

        Args:
            x: Point x coordinates (same coordinate system as the grid).
            y: Point y coordinates, same shape as ``x``.
            fill: Value for points outside the grid, with NaN coordinates, or in NODATA cells.
                The default 0.0 reads as "dry" for depth grids.

        Returns:
            Float array shaped like ``x``.

        Raises:
            HazardError: If ``x`` and ``y`` differ in shape.
        """
        col_f, row_from_south_f, inside = self._cells(x, y, "sample")
        out = np.full(inside.shape, fill, dtype=np.float64)
        cols = col_f[inside].astype(np.intp)
        rows = self.nrows - 1 - row_from_south_f[inside].astype(np.intp)
        picked = self.values[rows, cols]
        out[inside] = np.where(np.isnan(picked), fill, picked)
        return out

    def covers(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Whether each point lies within the grid (NODATA cells included), as :meth:`sample`.

        Raises:
            HazardError: If ``x`` and ``y`` differ in shape.
        """
        return self._cells(x, y, "covers")[2]

    @property
    def extent(self) -> tuple[float, float, float, float]:
        """``(west, east, south, north)``: the x and y the grid spans."""
        return (
            self.xll,
            self.xll + self.ncols * self.cellsize,
            self.yll,
            self.yll + self.nrows * self.cellsize,
        )

    def _cells(
        self, x: np.ndarray, y: np.ndarray, method: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each point's column and row counted from the south (as floats), and whether inside."""
        xs = np.asarray(x, dtype=np.float64)
        ys = np.asarray(y, dtype=np.float64)
        if xs.shape != ys.shape:
            msg = f"{self._name()}: {method}: x has shape {xs.shape} but y has shape {ys.shape}"
            raise HazardError(msg)
        col_f = _cell_index(xs - self.xll, self.cellsize)
        # Rows count from the north in the file but y grows northwards.
        row_from_south_f = _cell_index(ys - self.yll, self.cellsize)
        inside = (
            (col_f >= 0) & (col_f < self.ncols) & (row_from_south_f >= 0)
            & (row_from_south_f < self.nrows)
        )  # fmt: skip
        return col_f, row_from_south_f, inside

    def _name(self) -> str:
        return str(self.path) if self.path is not None else "<grid>"


def _is_number(token: str) -> bool:
    # Python reads "1_0" as 10; numpy's parser and GIS tools do not: it is no number here.
    if "_" in token:
        return False
    try:
        float(token)
    except ValueError:
        return False
    return True


def _looks_numeric(token: str) -> bool:
    """Whether ``token`` starts as a number does: a header key starts with a letter."""
    return token[0] in "+-.0123456789"


def _parse_header(lines: list[str], where: str) -> tuple[dict[str, str], int]:
    """Return the raw header values by lower-case key and the index of the first data line."""
    header: dict[str, str] = {}
    index = 0
    for index, line in enumerate(lines):
        tokens = line.split()
        if not tokens:
            continue
        if _looks_numeric(tokens[0]) or _is_number(tokens[0]):  # "nan" starts with a letter
            break
        key = tokens[0].lower()
        if key not in _HEADER_KEYS:
            msg = (
                f"{where}: line {index + 1}: unknown header key {tokens[0]!r} "
                "(expected ncols, nrows, xllcorner|xllcenter, yllcorner|yllcenter, cellsize, "
                "NODATA_value)"
            )
            raise HazardError(msg)
        if len(tokens) != 2:
            msg = f"{where}: header {tokens[0]!r}: expected one value, got {line.strip()!r}"
            raise HazardError(msg)
        if key in header:
            msg = f"{where}: header {tokens[0]!r}: given twice"
            raise HazardError(msg)
        header[key] = tokens[1]
    else:
        index = len(lines)
    return header, index


def _header_int(header: dict[str, str], key: str, where: str) -> int:
    if key not in header:
        raise HazardError(f"{where}: header {key!r}: missing")
    raw = header[key]
    try:
        value = int(raw) if "_" not in raw else 0
    except ValueError:
        value = 0
    if value < 1:
        raise HazardError(f"{where}: header {key!r}: expected a positive integer, got {raw!r}")
    return value


def _header_float(header: dict[str, str], key: str, where: str, *, bounded: bool = True) -> float:
    raw = header[key]
    value = float(raw) if _is_number(raw) else math.nan
    if not math.isfinite(value):
        raise HazardError(f"{where}: header {key!r}: expected a finite number, got {raw!r}")
    if bounded and abs(value) > MOST:
        raise HazardError(f"{where}: header {key!r}: {raw!r} is beyond {MOST:g}")
    return value


def _corner(header: dict[str, str], axis: str, cellsize: float, where: str) -> float:
    corner, center = f"{axis}llcorner", f"{axis}llcenter"
    if corner in header and center in header:
        raise HazardError(f"{where}: header {corner!r}: give {corner} or {center}, not both")
    if corner in header:
        return _header_float(header, corner, where)
    if center in header:
        return _header_float(header, center, where) - cellsize / 2.0
    raise HazardError(f"{where}: header {corner!r}: missing (or {center!r})")


def _diagnose_body(body: list[str], first_line: int, nrows: int, ncols: int, where: str) -> None:
    """Find why the fast parse failed and raise a HazardError naming the line."""
    count = 0
    for offset, line in enumerate(body):
        for token in line.split():
            if not _is_number(token):
                row, col = divmod(count, ncols)
                msg = (
                    f"{where}: line {first_line + offset + 1}: non-numeric value {token!r} "
                    f"(grid row {row + 1}, column {col + 1})"
                )
                raise HazardError(msg)
            count += 1
    expected = nrows * ncols
    if count != expected:
        detail = ""
        for offset, line in enumerate(body):
            n = len(line.split())
            if n and n != ncols:
                detail = f"; line {first_line + offset + 1} has {n} values, ncols is {ncols}"
                break
        msg = (
            f"{where}: expected nrows x ncols = {nrows} x {ncols} = {expected} values, "
            f"found {count}{detail}"
        )
        raise HazardError(msg)


def _refuse_value(
    body: list[str], first_line: int, ncols: int, nodata: float | None, where: str
) -> None:
    """Raise a HazardError naming the line of the body's first value no grid may hold.

    That is NaN, an infinity or a value beyond :data:`MOST` either way (the NODATA_value aside).
    """
    count = 0
    for offset, line in enumerate(body):
        for token in line.split():
            value = float(token)
            if value != nodata and not abs(value) <= MOST:
                row, col = divmod(count, ncols)
                problem = "is not finite" if not math.isfinite(value) else f"is beyond {MOST:g}"
                msg = (
                    f"{where}: line {first_line + offset + 1}: value {token!r} {problem} "
                    f"(grid row {row + 1}, column {col + 1}); mark cells without data with "
                    "the NODATA_value"
                )
                raise HazardError(msg)
            count += 1


def read_ascii_grid(path: str | os.PathLike[str]) -> AsciiGrid:
    """Read an ESRI ASCII grid.

    Rows are normally one per line; a file that wraps rows across lines is accepted as long as
    it holds exactly ``nrows * ncols`` numbers.

    Args:
        path: The ``.asc`` file.

    Returns:
        The grid, NODATA cells as NaN.

    Raises:
        HazardError: If the file is missing or unreadable, a header key is missing, repeated,
            unknown or invalid, a value is not a finite number, or the number of values is not
            ``nrows * ncols``; the message names the file and the key or line.
    """
    file = Path(path)
    where = str(file)
    try:
        text = read_text(file, encoding="ascii", limit=None)
    except FileNotFoundError:
        raise HazardError(f"{where}: grid file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HazardError(f"{where}: cannot read grid file ({exc})") from exc
    lines = text.splitlines()
    header, first_data = _parse_header(lines, where)
    ncols = _header_int(header, "ncols", where)
    nrows = _header_int(header, "nrows", where)
    if "cellsize" not in header:
        raise HazardError(f"{where}: header 'cellsize': missing")
    cellsize = _header_float(header, "cellsize", where)
    if cellsize < LEAST_CELLSIZE:
        raise HazardError(
            f"{where}: header 'cellsize': must be at least {LEAST_CELLSIZE:g}, "
            f"got {header['cellsize']!r}"
        )
    xll = _corner(header, "x", cellsize, where)
    yll = _corner(header, "y", cellsize, where)
    # A NODATA_value marks cells, so it may lie beyond MOST: -3.4e38, float32's least, is the
    # usual one (GDAL, ArcGIS).
    nodata = (
        _header_float(header, "nodata_value", where, bounded=False)
        if "nodata_value" in header
        else None
    )

    body = lines[first_data:]
    values: np.ndarray | None = None
    if any(line.strip() for line in body):
        try:
            # numpy's C parser is the fast path; it needs one grid row per line.
            values = np.loadtxt(body, dtype=np.float64, comments=None, ndmin=2)
        except ValueError:
            values = None
        if values is not None and values.shape != (nrows, ncols):
            values = None
    if values is None:
        # Slow path: wrapped rows are legal, anything else gets a precise error.
        _diagnose_body(body, first_data, nrows, ncols, where)
        tokens = " ".join(body).split()
        values = np.array(tokens, dtype=np.float64).reshape(nrows, ncols)
    outside = ~(np.abs(values) <= MOST)  # NaN too
    if nodata is not None:
        outside &= values != nodata
    if outside.any():
        _refuse_value(body, first_data, ncols, nodata, where)
    if nodata is not None:
        values[values == nodata] = np.nan
    values.flags.writeable = False
    return AsciiGrid(values=values, xll=xll, yll=yll, cellsize=cellsize, path=file)


def _cell_index(offset: np.ndarray, cellsize: float) -> np.ndarray:
    """``floor(offset / cellsize)``, with a point on a cell edge in the cell it begins.

    Decimal cell sizes are inexact in binary (0.3 / 0.1 is 2.9999999999999996): the quotient
    is rounded to 9 decimals first, far below any cell but far above the rounding error.
    """
    return np.floor(np.round(offset / cellsize, 9))
