-- Results of `lowtail model ...`: one row per model computed, with everything it was
-- computed from, so a report can trace each predicted figure to its inputs.
-- kind = overload | knee | evt | aliasing | simulate
CREATE SEQUENCE IF NOT EXISTS model_id_seq START 1;
CREATE TABLE IF NOT EXISTS model_results (
    model_id         BIGINT PRIMARY KEY DEFAULT nextval('model_id_seq'),
    created_at       TIMESTAMP NOT NULL DEFAULT current_timestamp,
    lowtail_version  VARCHAR NOT NULL,
    kind             VARCHAR NOT NULL,
    label            VARCHAR,
    experiment_id    BIGINT,            -- -> experiments (knee, overload from a sweep)
    dut_name         VARCHAR,
    run_id           BIGINT,            -- -> runs (evt, aliasing, simulate compared with a run)
    analysis_id      BIGINT,            -- -> analyses
    source           VARCHAR,           -- the file or the run the model read
    inputs           JSON NOT NULL,     -- options and input figures, as given or as read
    result           JSON NOT NULL,     -- the document `--json` prints
    partial          BOOLEAN NOT NULL
);
