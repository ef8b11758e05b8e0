-- Campaigns (`lowtail campaign analyze`): the capture pairs of a directory analysed on a Dask
-- cluster. A campaign is identified by its source and options (campaign_key), so running it
-- again resumes it; a pair by its identity (pair_key: both files' paths, sizes and mtimes, and
-- the options), so a pair already stored is never analysed or stored twice.
CREATE SEQUENCE IF NOT EXISTS campaign_id_seq START 1;
CREATE TABLE IF NOT EXISTS campaigns (
    campaign_id   BIGINT PRIMARY KEY DEFAULT nextval('campaign_id_seq'),
    campaign_key  VARCHAR NOT NULL,
    source        VARCHAR NOT NULL,    -- the directory, or "database" (--from-db)
    options       JSON NOT NULL,
    created_at    TIMESTAMP NOT NULL DEFAULT current_timestamp,
    status        VARCHAR NOT NULL     -- running | finished | partial | interrupted
);

-- One row per pair analysed (analysis_id set) or failed (error set); a failed pair is tried
-- again when the campaign resumes, and its row replaced.
CREATE TABLE IF NOT EXISTS campaign_pairs (
    campaign_id  BIGINT NOT NULL,
    pair_key     VARCHAR NOT NULL,
    name         VARCHAR NOT NULL,
    pre_path     VARCHAR,
    post_path    VARCHAR,
    analysis_id  BIGINT,
    worker       VARCHAR,
    error        VARCHAR
);
