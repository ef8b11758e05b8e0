-- The host-state fingerprint of each run (host/state.py): the settings that decide a tail,
-- read when the run started, and their short id (`compare --by host_state`).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS host_state JSON;

-- `lowtail tune` sessions: the experiment measured before, each change tried (applied,
-- measured again, compared, kept or undone), the undo file of what was kept, and the boot-time
-- parameters left to set (for `tune --after-reboot ID`).
CREATE SEQUENCE IF NOT EXISTS tune_session_ids START 1;
CREATE TABLE IF NOT EXISTS tune_sessions (
    tune_id             BIGINT PRIMARY KEY DEFAULT nextval('tune_session_ids'),
    created_at          TIMESTAMP NOT NULL DEFAULT current_timestamp,
    spec_path           VARCHAR NOT NULL,      -- the experiment file measured
    before_experiment   BIGINT NOT NULL,
    status              VARCHAR NOT NULL,      -- running | finished | interrupted | failed
    document            JSON NOT NULL          -- `lowtail tune --json`'s document
);
