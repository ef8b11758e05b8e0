-- Runs on real wiring (issue 14): the testbed a run ran on and the clocks of its two sides.

-- {"kind": "namespaces" | "interfaces" | "hosts" | "imported", the points (host, interface) of
--  the generator, PRE and POST, and "clocks": {"same": bool, "why": text, "pre": {...}, "post": {...}}
--  (host, boot id, interface, timestamp source, PHC index, PTP state of each side)}; an imported
--  pair's axis values under "axes".
ALTER TABLE runs ADD COLUMN IF NOT EXISTS testbed JSON;
