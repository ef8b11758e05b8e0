-- `lowtail explain`: each run's kernel trace (how it was recorded, the Parquet file of its
-- intervals beside the run's series, its facts) and what the analysis of its tail concluded.
CREATE TABLE IF NOT EXISTS run_traces (
    run_id     BIGINT PRIMARY KEY,
    method     VARCHAR NOT NULL,      -- tracefs | none
    reason     VARCHAR,               -- why there is no trace (method none)
    path       VARCHAR,               -- trace.parquet in the run's folder
    raw_bytes  BIGINT,                -- the kernel's ring-buffer pages read after the run
    document   JSON NOT NULL          -- trace/run.py's TraceDocument
);

-- One explanation per run (explaining again replaces it): the document `lowtail explain
-- --json` prints, and its causes as rows for the comparisons' causes column.
CREATE TABLE IF NOT EXISTS run_explanations (
    run_id             BIGINT PRIMARY KEY,
    explained_at       TIMESTAMP NOT NULL DEFAULT current_timestamp,
    threshold_ns       BIGINT,
    tail_packets       BIGINT NOT NULL,
    unexplained_share  DOUBLE NOT NULL,
    headline           VARCHAR,       -- the host could not measure what was asked
    document           JSON NOT NULL
);
CREATE TABLE IF NOT EXISTS run_causes (
    run_id    BIGINT NOT NULL,
    rank      INTEGER NOT NULL,       -- 1 explains the most tail packets
    kind      VARCHAR NOT NULL,
    role      VARCHAR NOT NULL,
    cpu       INTEGER,
    share     DOUBLE NOT NULL,
    added_ns  BIGINT NOT NULL,
    what      VARCHAR,                -- the evidence's name of what ran
    PRIMARY KEY (run_id, rank)
);
