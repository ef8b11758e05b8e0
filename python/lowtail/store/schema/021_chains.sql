-- A chain's runs (`chain = [...]` in the experiment file, docs/chains.md): the chain's check
-- that its hops add up, and each hop's analysis of the captures on either side of its DuT.
CREATE TABLE IF NOT EXISTS run_chains (
    run_id            BIGINT PRIMARY KEY,
    hops              INTEGER NOT NULL,
    packets_compared  BIGINT NOT NULL,    -- seen on every captured link
    sum_mismatch_ns   BIGINT,             -- the largest |sum of hop latencies - end to end|
    clock_bound_ns    BIGINT,             -- what the clocks allow it to be (0: one clock)
    document          JSON NOT NULL       -- analyze/document.py's ChainDocument
);
CREATE TABLE IF NOT EXISTS run_hops (
    run_id       BIGINT NOT NULL,
    hop          INTEGER NOT NULL,        -- 1 for the DuT the traffic meets first
    name         VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,
    sent         BIGINT NOT NULL,
    received     BIGINT NOT NULL,
    lost         BIGINT NOT NULL,
    lat_p50_ns   BIGINT,
    lat_p99_ns   BIGINT,
    lat_p99_9_ns BIGINT,
    lat_max_ns   BIGINT,
    lat_mean_ns  DOUBLE,
    share        DOUBLE,                  -- of the chain's mean latency (the hops' add up to 1)
    series_path  VARCHAR,
    PRIMARY KEY (run_id, hop)
);
