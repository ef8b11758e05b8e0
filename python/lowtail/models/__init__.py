"""Models of a device under test: overload (R_max), the knee of a rate sweep, the
extreme-value tail, interrupt/traffic aliasing, and a discrete-event device simulation.
They read Parquet series or the database and return plain dicts; `lowtail.store.models`
stores them, `lowtail.report.models` draws them."""
