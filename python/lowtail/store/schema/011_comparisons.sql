-- Comparisons of stored runs (`lowtail compare`): the document `--json` prints, and what
-- its page draws, per configuration (`configuration` is its index in the document's
-- `configurations`; a member is a run's analysis, `run_id` NULL for a plain analysis).
CREATE SEQUENCE IF NOT EXISTS comparison_id_seq START 1;
CREATE TABLE IF NOT EXISTS comparisons (
    comparison_id    BIGINT PRIMARY KEY DEFAULT nextval('comparison_id_seq'),
    created_at       TIMESTAMP NOT NULL DEFAULT current_timestamp,
    lowtail_version  VARCHAR NOT NULL,
    label            VARCHAR,
    selection        JSON NOT NULL,     -- the SELECTION words as given
    by_axes          JSON NOT NULL,     -- the axes that make a configuration
    document         JSON NOT NULL,     -- what `lowtail compare --json` prints
    partial          BOOLEAN NOT NULL
);

-- Latency by percentile, exact nearest rank, at the same percentiles for every source of
-- a configuration: its pooled packets, each repetition (the band is their min and max at
-- each percentile) and its floor (the calibration runs pooled). percentile 1 is the maximum.
CREATE TABLE IF NOT EXISTS comparison_curves (
    comparison_id  BIGINT NOT NULL,
    configuration  INTEGER NOT NULL,
    source         VARCHAR NOT NULL,    -- pooled | repetition | floor
    run_id         BIGINT,              -- the repetition's run
    analysis_id    BIGINT,              -- the repetition's analysis
    percentile     DOUBLE NOT NULL,
    value_ns       BIGINT NOT NULL
);

-- The cumulative distribution of each configuration's pooled packets: the latency at
-- each fraction k/1000 (nearest rank), what a CDF plot draws.
CREATE TABLE IF NOT EXISTS comparison_cdf (
    comparison_id  BIGINT NOT NULL,
    configuration  INTEGER NOT NULL,
    fraction       DOUBLE NOT NULL,
    value_ns       BIGINT NOT NULL
);

-- The worst events of each configuration's repetitions (from their analyses), with the
-- time since the repetition's first packet.
CREATE TABLE IF NOT EXISTS comparison_worst (
    comparison_id  BIGINT NOT NULL,
    configuration  INTEGER NOT NULL,
    run_id         BIGINT,
    analysis_id    BIGINT NOT NULL,
    t_ns           BIGINT NOT NULL,
    latency_ns     BIGINT NOT NULL
);
