"""Models of a device under test: overload (R_max), the knee of a rate sweep, the
extreme-value tail, interrupt/traffic aliasing, and a discrete-event device simulation.
They read Parquet series or the database and return their documents (`lowtail.models.document`);
each has an options dataclass and one `*_and_store` call, `lowtail.store.models` stores the
results, `lowtail.models.page` draws them."""
