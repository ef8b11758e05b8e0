-- Experiments and their runs (written by `lowtail run` / `lowtail calibrate`).
-- A run is one (DuT, rate, repetition) combination; its figures live in `analyses`.
CREATE SEQUENCE IF NOT EXISTS experiment_id_seq START 1;
CREATE TABLE IF NOT EXISTS experiments (
    experiment_id  BIGINT PRIMARY KEY DEFAULT nextval('experiment_id_seq'),
    name           VARCHAR NOT NULL,
    created_at     TIMESTAMP NOT NULL DEFAULT current_timestamp,
    spec           JSON NOT NULL,      -- the experiment file, as JSON
    spec_hash      VARCHAR NOT NULL,   -- identifies "the same experiment" for resuming
    host           JSON NOT NULL,      -- kernel, command line, CPU model, core plan, lowtail version
    status         VARCHAR NOT NULL    -- running | finished | interrupted | failed
);

CREATE SEQUENCE IF NOT EXISTS run_id_seq START 1;
CREATE TABLE IF NOT EXISTS runs (
    run_id           BIGINT PRIMARY KEY DEFAULT nextval('run_id_seq'),
    experiment_id    BIGINT NOT NULL,
    combination_key  VARCHAR NOT NULL, -- stable key of (dut, rate, frame size, burst, repetition): resume skips done keys
    dut_name         VARCHAR NOT NULL,
    dut_kind         VARCHAR NOT NULL, -- kernel-mirred | bridge | lowtail-fwd | dpdk-testpmd | custom | wire (calibration)
    dut_config       JSON NOT NULL,
    calibration      BOOLEAN NOT NULL,
    rate_pps         BIGINT NOT NULL,
    frame_size       INTEGER NOT NULL,
    burst            INTEGER NOT NULL,
    repetition       INTEGER NOT NULL,
    duration_ns      BIGINT NOT NULL,
    warmup_ns        BIGINT NOT NULL,
    started_at       TIMESTAMP NOT NULL,
    finished_at      TIMESTAMP,
    analysis_id      BIGINT,           -- -> analyses.analysis_id (NULL when analysis failed)
    series_path      VARCHAR,          -- Parquet matched series (id, pre_ts_ns, post_ts_ns, latency_ns)
    valid            BOOLEAN NOT NULL,
    invalid_reasons  JSON NOT NULL,    -- list of strings
    generator        JSON NOT NULL,    -- achieved rate, pacing error figures
    capture          JSON NOT NULL,    -- timestamp source, kernel drop counters
    containment      JSON NOT NULL,    -- bare, or cgroup cpuset and its cores
    energy           JSON              -- RAPL figures or {"available": false}
);

-- Added by the testbed (kept separate so databases made before them gain the columns).
ALTER TABLE experiments ADD COLUMN IF NOT EXISTS finished_at TIMESTAMP;
ALTER TABLE experiments ADD COLUMN IF NOT EXISTS data_dir VARCHAR;      -- captures and series of its runs
ALTER TABLE runs ADD COLUMN IF NOT EXISTS traffic JSON;                 -- flows, UDP port, frames sent
ALTER TABLE runs ADD COLUMN IF NOT EXISTS dut_stats JSON;               -- the DuT's own counters, if it keeps any
ALTER TABLE runs ADD COLUMN IF NOT EXISTS capture_paths JSON;           -- kept PRE/POST captures (or [])
