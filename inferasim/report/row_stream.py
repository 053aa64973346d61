"""Per-request rows written to disk as a replay runs, in row groups, so memory holds the
requests in flight rather than every request of the run (docs/fleet.md).

Rows are the in-memory frame's (``frame.request_frame`` over each group), in request-id order:
a finished request waits in memory until every earlier one has finished, then goes out with
its group. Parquet (``pyarrow``) where installed, else CSV. The engines' occupancy samples
are drained to ``occupancy.csv`` at each group (in group order, each group by instance).
Counts and token totals are kept as the rows go (``StreamTotals``), and the summary's
distributions are read back from the written columns (``streamed_summary``).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pandas as pd

from inferasim.report.frame import OK, UNFINISHED, request_frame

#: Rows per written group: a few MB of numbers, written in one call.
GROUP_ROWS = 65_536
FORMATS = ("parquet", "csv")


def default_format() -> str:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return "csv"
    return "parquet"


#: ``read_csv`` arguments that read back every float exactly as written: pandas 3 does so by
#: default (and deprecates asking), pandas 2 only when asked for its round-trip parser.
EXACT_FLOATS = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}


@attrs.define
class StreamTotals:
    """Exact counts and token sums over every row written."""

    rows: int = 0
    ok: int = 0
    failed: int = 0
    unfinished: int = 0
    prompt_tokens: int = 0
    output_tokens_ok: int = 0
    groups: int = 0

    def add(self, frame: pd.DataFrame) -> None:
        status = frame.status.to_numpy()
        ok = status == OK
        unfinished = status == UNFINISHED
        self.rows += len(frame)
        self.ok += int(ok.sum())
        self.unfinished += int(unfinished.sum())
        self.failed += int(len(frame) - ok.sum() - unfinished.sum())
        self.prompt_tokens += int(frame.prompt_tokens.sum())
        self.output_tokens_ok += int(frame.output_tokens.to_numpy()[ok].sum())
        self.groups += 1

    @classmethod
    def of(cls, frame: pd.DataFrame) -> StreamTotals:
        totals = cls()
        totals.add(frame)
        totals.groups = 0
        return totals


class RowStream:
    """Where a replay's finished requests go (``simulate(..., rows=...)``)."""

    def __init__(self, out_dir: Path | str, fmt: str | None = None,
                 group_rows: int = GROUP_ROWS):
        fmt = fmt or default_format()
        if fmt not in FORMATS:
            raise ValueError(f"rows format {fmt!r}: expected one of {', '.join(FORMATS)}")
        if group_rows < 1:
            raise ValueError(f"group_rows must be >= 1, got {group_rows}")
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fmt = fmt
        self.group_rows = group_rows
        self.path = self.dir / f"requests.{fmt}"
        self.occupancy_path = self.dir / "occupancy.csv"
        self.totals = StreamTotals()
        self._tokens_per_step = 1.0
        self._stream_interval = 1
        self._engines: list = []
        self._pending: dict[int, object] = {}   # sent, not yet written
        self._finished: set[int] = set()
        self._next = 0                           # the lowest id not yet written
        self._ready: list = []                   # finished, in id order, not yet written
        self._writer = None
        self._occupancy_header = True
        self.max_pending = 0
        self.closed = False

    def start(self, tokens_per_step: float, stream_interval: int, engines: list) -> None:
        """The scenario's row settings and the engines whose occupancy is drained."""
        self._tokens_per_step = tokens_per_step
        self._stream_interval = stream_interval
        self._engines = engines
        for path in (self.path, self.occupancy_path):
            path.unlink(missing_ok=True)

    def sent(self, req) -> None:
        self._pending[req.rid] = req
        req.done.callbacks.append(lambda _event: self._on_done(req.rid))
        if len(self._pending) > self.max_pending:
            self.max_pending = len(self._pending)

    def _on_done(self, rid: int) -> None:
        self._finished.add(rid)
        pending, finished = self._pending, self._finished
        while self._next in finished:
            finished.discard(self._next)
            self._ready.append(pending.pop(self._next))
            self._next += 1
        if len(self._ready) >= self.group_rows:
            self._write(self._ready)
            self._ready = []

    def close(self) -> None:
        """Write what is left: the finished, then those still in flight (``unfinished``)."""
        if self.closed:
            return
        rest = self._ready + [self._pending[r] for r in sorted(self._pending)]
        self._pending.clear()
        self._finished.clear()
        self._ready = []
        if rest or self.totals.rows == 0:
            self._write(rest)
        if self._writer is not None and self.fmt == "parquet":
            self._writer.close()
        self._writer = None
        self.closed = True

    def _write(self, reqs: list) -> None:
        frame = request_frame(reqs, self._tokens_per_step, self._stream_interval)
        self.totals.add(frame)
        if self.fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(frame, preserve_index=False)
            if self._writer is None:
                self._writer = pq.ParquetWriter(self.path, table.schema)
            self._writer.write_table(table.cast(self._writer.schema))
        else:
            frame.to_csv(self.path, mode="a", header=self._writer is None, index=False)
            self._writer = True
        self._drain_occupancy()

    def _drain_occupancy(self) -> None:
        rows = []
        for e in self._engines:
            rows.extend((e.index, t, used, cached) for t, used, cached in e.stats.occupancy)
            e.stats.occupancy.clear()
        if not rows and not self._occupancy_header:
            return
        frame = pd.DataFrame(rows, columns=["instance", "time_s", "pool_used_tokens",
                                            "cached_tokens"])
        frame.to_csv(self.occupancy_path, mode="a", header=self._occupancy_header, index=False)
        self._occupancy_header = False

    def read(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The written rows (all columns, or ``columns``), as the in-memory frame has them."""
        if self.fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(self.path, columns=columns).to_pandas()
        return pd.read_csv(self.path, usecols=columns, **EXACT_FLOATS)


def rows_equal_totals(frame: pd.DataFrame, totals: StreamTotals) -> bool:
    """The streamed counts and sums are those of ``frame`` (every written row)."""
    return attrs.evolve(StreamTotals.of(frame), groups=totals.groups) == totals
